"""Optional energy measurement: NVML (pynvml) on NVIDIA GPUs, the INA3221 rails on a Jetson.

Everything is optional: PowerMeter.open() returns None where no reading exists (plain CPUs),
and the benchmark then leaves the energy columns empty.
"""
from __future__ import annotations

import glob
import threading
import time
from pathlib import Path

_JETSON_GLOBS = (
    "/sys/bus/i2c/drivers/ina3221x/*/iio:device*/in_power*_input",  # JetPack 4/5, mW
    "/sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*/in*_input",  # JetPack 6 (voltage, mV)
)


class PowerMeter:
    """Integrates power over [start, stop]: NVML's energy counter where supported, else a
    sampling thread (every `interval` s) integrating instantaneous watts."""

    def __init__(self, source: str, read_watts, read_joules=None, interval: float = 0.02) -> None:
        self.source = source
        self._watts = read_watts
        self._joules = read_joules
        self._interval = interval
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._energy = 0.0
        self._j0 = 0.0

    @staticmethod
    def open(device: str = "cpu") -> "PowerMeter | None":
        if device.startswith("cuda"):
            m = PowerMeter._nvml(device)
            if m is not None:
                return m
        return PowerMeter._jetson()

    @staticmethod
    def _nvml(device: str) -> "PowerMeter | None":
        try:
            import pynvml  # optional

            pynvml.nvmlInit()
            index = int(device.split(":")[1]) if ":" in device else 0
            h = pynvml.nvmlDeviceGetHandleByIndex(index)
            watts = lambda: pynvml.nvmlDeviceGetPowerUsage(h) / 1e3  # noqa: E731
            joules = None
            try:
                pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
                joules = lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h) / 1e3  # noqa: E731
            except Exception:  # noqa: BLE001 - older GPUs
                pass
            watts()
            return PowerMeter("nvml", watts, joules)
        except Exception:  # noqa: BLE001 - no pynvml, no driver, no GPU
            return None

    @staticmethod
    def _jetson() -> "PowerMeter | None":
        files = sorted(glob.glob(_JETSON_GLOBS[0]))
        if files:
            def watts() -> float:
                return sum(float(Path(f).read_text()) for f in files) / 1e3
            try:
                watts()
                return PowerMeter("jetson-ina3221", watts)
            except OSError:
                return None
        try:
            from jtop import jtop  # optional

            j = jtop()
            j.start()
            return PowerMeter("jtop", lambda: j.power["tot"]["power"] / 1e3)
        except Exception:  # noqa: BLE001
            return None

    def start(self) -> None:
        self._energy = 0.0
        if self._joules is not None:
            self._j0 = self._joules()
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, daemon=True, name="oxygen-power")
        self._thread.start()

    def _sample(self) -> None:
        last_t, last_w = time.perf_counter(), self._watts()
        while not self._stop.wait(self._interval):
            t, w = time.perf_counter(), self._watts()
            self._energy += 0.5 * (w + last_w) * (t - last_t)
            last_t, last_w = t, w

    def stop(self) -> float:
        """Joules since start()."""
        if self._joules is not None:
            return self._joules() - self._j0
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self._energy
