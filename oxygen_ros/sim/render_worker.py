"""Camera rendering off the physics thread (ROS-free).

A render takes 15-35 ms of a shared core here, longer than a 12.5 ms control step: done in the
physics thread, every image delays the next steps. The physics thread only captures the scene
(FastCamera.capture, ~1 ms, while the worker is idle) and goes on stepping; the worker draws it
(OpenGL on OSMesa; MuJoCo releases the GIL meanwhile) and hands the image to `deliver` with the
stamp of the step it shows. An image due while the previous one is still being drawn is skipped
(counted), never queued: the newest image is the one worth having, and nothing grows.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np


class RenderWorker:
    def __init__(self, deliver: Callable[[np.ndarray, Any, Any], None]) -> None:
        self._deliver = deliver  # (rgb, stamp, tag) in the worker thread
        self._cv = threading.Condition()
        self._job: tuple[Any, Any, Any] | None = None
        self._busy = False
        self._stop = False
        self.rendered = 0
        self.skipped = 0
        self.render_s = 0.0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="sim-render", daemon=True)
        self._thread.start()

    def submit(self, camera, stamp: Any, tag: Any = None) -> bool:
        """Capture `camera`'s scene now and draw it in the worker; False (skipped) while busy."""
        with self._cv:
            if self._busy or self._stop:
                self.skipped += 1
                return False
            camera.capture()
            self._job = (camera, stamp, tag)
            self._busy = True
            self._cv.notify_all()
        return True

    def wait_idle(self, timeout_s: float = 5.0) -> bool:
        with self._cv:
            return self._cv.wait_for(lambda: not self._busy, timeout=timeout_s)

    def close(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        self._thread.join(timeout=5.0)

    def _run(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._job is not None or self._stop)
                if self._job is None:  # stopping
                    return
                camera, stamp, tag = self._job
                self._job = None
            try:
                t0 = time.perf_counter()
                rgb = camera.draw()
                self.render_s += time.perf_counter() - t0
                self.rendered += 1
                self._deliver(rgb, stamp, tag)
            except BaseException as exc:  # noqa: BLE001 - kept for the loop to report
                self.error = exc
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()
