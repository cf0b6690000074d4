"""The render thread: captures in the caller's thread, draws in its own, skips (never queues)
an image due while the previous one is still being drawn."""
from __future__ import annotations

import threading

import numpy as np

from oxygen_ros.sim.render_worker import RenderWorker


class SlowCamera:
    def __init__(self) -> None:
        self.release = threading.Event()
        self.captured_in: list[str] = []
        self.value = 0

    def capture(self) -> None:
        self.captured_in.append(threading.current_thread().name)
        self.scene = self.value  # what draw will show, frozen now

    def draw(self) -> np.ndarray:
        self.release.wait(5.0)
        return np.full((2, 2, 3), self.scene, np.uint8)


def test_capture_now_draw_later_skip_while_busy():
    got = []
    worker = RenderWorker(lambda rgb, stamp, tag: got.append((int(rgb[0, 0, 0]), stamp)))
    cam = SlowCamera()
    try:
        cam.value = 7
        assert worker.submit(cam, stamp="t1")
        cam.value = 9  # the simulation moves on: the image shows the captured scene
        assert not worker.submit(cam, stamp="t2")  # still drawing: skipped, not queued
        cam.release.set()
        assert worker.wait_idle(5.0)
        assert got == [(7, "t1")] and worker.skipped == 1 and worker.rendered == 1
        assert cam.captured_in == [threading.current_thread().name]
        assert worker.submit(cam, stamp="t3") and worker.wait_idle(5.0)
        assert got[-1] == (9, "t3")
    finally:
        worker.close()


def test_a_failing_draw_is_kept_for_the_loop_to_report():
    class Broken(SlowCamera):
        def draw(self):
            raise RuntimeError("no GL")

    worker = RenderWorker(lambda *a: None)
    try:
        assert worker.submit(Broken(), stamp=None) and worker.wait_idle(5.0)
        assert isinstance(worker.error, RuntimeError)
        assert worker.submit(Broken(), stamp=None)  # not stuck busy after a failure
    finally:
        worker.close()
