"""--device cuda without CUDA (or without kernels for the GPU): one line saying so and what to
install, not a torch traceback."""
from __future__ import annotations

import pytest
import torch

from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.runner.device import check_device
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.families.loader import init_model

NO_CUDA = not torch.cuda.is_available()


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
def test_cuda_without_cuda_is_one_clear_error():
    with pytest.raises(ValueError, match=r"device 'cuda'.*(built without CUDA|no usable CUDA).*torch"):
        check_device("cuda")
    with pytest.raises(ValueError, match="device 'cuda:0'"):
        Engine(PRESETS["tiny"], EngineConfig(device="cuda:0"))
    with pytest.raises(ValueError, match="device 'cuda'"):
        init_model(PRESETS["tiny"], device="cuda")
    assert check_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="only cpu and cuda"):
        check_device("meta")


def test_gpu_without_kernels_for_its_arch(monkeypatch):
    """A torch build whose kernels stop below the GPU's architecture (Thor is sm_110)."""
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: (11, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "NVIDIA Thor")
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: ["sm_80", "sm_90"])
    with pytest.raises(ValueError, match=r"NVIDIA Thor \(sm_110\).*kernels only for sm_80, sm_90.*install"):
        check_device("cuda")
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: ["sm_90", "sm_110"])
    assert check_device("cuda") == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: ["sm_90", "compute_100"])  # PTX runs
    assert check_device("cuda").type == "cuda"
    with pytest.raises(ValueError, match="1 CUDA device"):
        check_device("cuda:1")


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
def test_commands_print_one_line(capsys):
    from oxygen_ros.cli import demo
    from oxygen_ros.cli import bench as cli

    assert demo.main(["--device", "cuda", "--frames", "1"]) == 2
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--quick", "--device", "cuda"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 2 and "Traceback" not in err, err
    assert lines[0].startswith("oxygen-demo: device 'cuda'") and "built without CUDA" in lines[0]
    assert lines[1].startswith("oxygen-bench: device 'cuda'") and "install a CUDA build of torch" in lines[1]
