"""Launch the oxygen lifecycle node (package oxygen_ros, executable oxygen_node, node name oxygen).

    ros2 launch oxygen_ros oxygen.launch.py                       # configure + activate
    ros2 launch oxygen_ros oxygen.launch.py autostart:=false      # stays unconfigured
    ros2 launch oxygen_ros oxygen.launch.py params_file:=/path/robot.yaml namespace:=arm

Lifecycle scheme: the LAUNCH FILE drives the transitions, the node's own `autostart` parameter
is forced false here (so nothing is driven twice). With autostart:=true (default) the launch
file emits ChangeState(configure) once the process starts and, on the node's
configuring -> inactive transition, ChangeState(activate). If configure fails the node stays
unconfigured (no activate is sent) and logs why. With autostart:=false nothing is emitted: use
`ros2 lifecycle set /oxygen configure` / `activate` or a lifecycle manager.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, EmitEvent, RegisterEventHandler
from launch.conditions import IfCondition
from launch.events import matches_action
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from launch_ros.parameter_descriptions import ParameterValue
from lifecycle_msgs.msg import Transition


def generate_launch_description():
    default_params = os.path.join(
        get_package_share_directory("oxygen_ros"), "config", "oxygen.yaml")

    params_file = LaunchConfiguration("params_file")
    namespace = LaunchConfiguration("namespace")
    autostart = LaunchConfiguration("autostart")
    log_level = LaunchConfiguration("log_level")
    use_sim_time = LaunchConfiguration("use_sim_time")

    arguments = [
        DeclareLaunchArgument(
            "params_file", default_value=default_params,
            description="YAML parameter file for the oxygen node (default: the package's "
                        "config/oxygen.yaml, tiny model on the CPU)"),
        DeclareLaunchArgument(
            "namespace", default_value="",
            description="Namespace of the node; its topics become <namespace>/oxygen/..."),
        DeclareLaunchArgument(
            "autostart", default_value="true",
            description="true: the launch file configures then activates the node; false: it "
                        "stays unconfigured until 'ros2 lifecycle set' or a lifecycle manager"),
        DeclareLaunchArgument(
            "log_level", default_value="info",
            description="Logging level of the node (debug, info, warn, error, fatal)"),
        DeclareLaunchArgument(
            "use_sim_time", default_value="false",
            description="Use /clock (simulation or bag playback) instead of the system clock"),
    ]

    node = LifecycleNode(
        package="oxygen_ros",
        executable="oxygen_node",
        name="oxygen",
        namespace=namespace,
        output="screen",
        emulate_tty=True,
        parameters=[
            params_file,
            {"use_sim_time": ParameterValue(use_sim_time, value_type=bool),
             # the launch file drives the lifecycle, never the node itself
             "autostart": False},
        ],
        arguments=["--ros-args", "--log-level", log_level],
    )

    configure = EmitEvent(
        event=ChangeState(
            lifecycle_node_matcher=matches_action(node),
            transition_id=Transition.TRANSITION_CONFIGURE),
        condition=IfCondition(autostart))

    activate_when_configured = RegisterEventHandler(
        OnStateTransition(
            target_lifecycle_node=node,
            start_state="configuring",
            goal_state="inactive",
            entities=[EmitEvent(event=ChangeState(
                lifecycle_node_matcher=matches_action(node),
                transition_id=Transition.TRANSITION_ACTIVATE))],
        ),
        condition=IfCondition(autostart))

    return LaunchDescription(arguments + [node, activate_when_configured, configure])
