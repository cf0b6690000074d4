"""One clear line when the requested device cannot run, instead of a torch traceback later
(`AssertionError: Torch not compiled with CUDA enabled`, `no kernel image is available`)."""
from __future__ import annotations

import torch

_INSTALL = ("install a CUDA build of torch (on Jetson AGX Thor: the JetPack 7 wheel, see "
            "docs/gpu.md, 'Install on Jetson AGX Thor'), or run with device cpu")


def check_device(device: str | torch.device) -> torch.device:
    """The torch.device for `device`; ValueError with what is missing and what to install."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device {device!r} is not a torch device ({exc})") from None
    if dev.type == "cpu":
        return dev
    if dev.type != "cuda":
        raise ValueError(f"device {device!r}: only cpu and cuda[:N] are supported")
    if torch.version.cuda is None or not torch.backends.cuda.is_built():
        raise ValueError(f"device {device!r} requested but this torch ({torch.__version__}) was "
                         f"built without CUDA: {_INSTALL}")
    if not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but torch {torch.__version__} finds no "
                         "usable CUDA GPU (driver missing or too old, or no GPU visible: check "
                         f"nvidia-smi / CUDA_VISIBLE_DEVICES); or {_INSTALL.split(', or ')[1]}")
    index = dev.index or 0
    if index >= torch.cuda.device_count():
        raise ValueError(f"device {device!r}: only {torch.cuda.device_count()} CUDA device(s) visible")
    major, minor = torch.cuda.get_device_capability(index)
    arch = f"sm_{major}{minor}"
    built = torch.cuda.get_arch_list()
    # a cubin for sm_XY runs on the same major with minor >= Y; PTX (compute_XY) is compiled
    # by the driver for any GPU at or above XY
    cc = major * 10 + minor
    cubins = [int(a[3:]) for a in built if a.startswith("sm_") and a[3:].isdigit()]
    ptx = [int(a[8:]) for a in built if a.startswith("compute_") and a[8:].isdigit()]
    runs = any(c // 10 == major and c <= cc for c in cubins) or any(p <= cc for p in ptx)
    if built and not runs:
        raise ValueError(f"device {device!r} is {torch.cuda.get_device_name(index)} ({arch}) but "
                         f"torch {torch.__version__} has kernels only for {', '.join(built)}: "
                         f"{_INSTALL}")
    return dev
