"""pip entry point for using the engine without colcon (`pip install -e . --no-deps`).

The ROS 2 package itself is built by colcon through CMakeLists.txt (build_type ament_cmake);
colcon ignores this file. The distribution name must differ from the ROS package name
`oxygen_ros`, otherwise pip would uninstall the CMake-installed oxygen_ros (with its msg/).
Dependencies are pinned in requirements.txt / requirements-ros.txt, not here, so that this
install never pulls an unpinned torch.
"""
from setuptools import find_packages, setup

setup(
    name="oxygen-ros-engine",
    version="0.1.0",
    description="VLA engine (actions + language from one paged KV cache) for the oxygen_ros ROS 2 package",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["oxygen_ros*"]),
    package_data={"oxygen_ros": ["**/*.cpp", "**/*.h", "**/*.yaml"]},
    include_package_data=True,
    install_requires=[],
    entry_points={
        "console_scripts": [
            "oxygen-demo=oxygen_ros.cli.demo:main",
            "oxygen-bench=oxygen_ros.cli.bench:main",
            "oxygen_node=oxygen_ros.cli.node:main",
            "oxygen-eval=oxygen_ros.cli.eval:main",
            "oxygen-replay=oxygen_ros.cli.replay:main",
            "oxygen-inspect=oxygen_ros.cli.inspect_checkpoint:main",
            "oxygen-sim=oxygen_ros.cli.sim:main",
            "oxygen-dev=oxygen_ros.cli.dev:main",
        ],
    },
    zip_safe=False,
)
