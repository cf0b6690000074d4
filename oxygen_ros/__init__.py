"""oxygen_ros: a VLA model serving actions and language from one paged KV cache, as a ROS 2 package.

The generated message module ``oxygen_ros.msg`` lives in the colcon install tree while the
hand-written code may be imported from the source tree; ``extend_path`` merges both.
"""
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"
