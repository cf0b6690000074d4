"""Text entering and leaving the node: ~/instruction, ~/ask, and the routing of request updates.

- ~/instruction sets the `instruction` parameter (so the parameter callback's checks apply to
  both ways in).
- ~/ask queues a question (Questions); a refused question gets its final ~/answer at once.
- route(): every engine request update goes to ~/memory or ~/answer; a question's final update
  retires it.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from rclpy.parameter import Parameter
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

from std_msgs.msg import String

from .questions import INVALID, Question, Questions

# a burst of questions must queue in the subscription, not be dropped by it (KEEP_LAST)
ASK_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                     history=HistoryPolicy.KEEP_LAST)


class TextIO:
    def __init__(self, node, publishers, questions: Questions,
                 warn: Callable[[str, str], None]) -> None:
        self._node = node
        self._pubs = publishers
        self.questions = questions
        self._warn = warn
        self._subs = [
            node.create_subscription(String, "~/instruction", self._instruction_cb, 10),
            node.create_subscription(String, "~/ask", self._ask_cb, ASK_QOS),
        ]

    def destroy(self) -> None:
        for sub in self._subs:
            self._node.destroy_subscription(sub)
        self._subs.clear()

    # -- in ---------------------------------------------------------------------------------------
    def _instruction_cb(self, msg: String) -> None:
        text = msg.data.strip()
        if not text:
            self._warn("instruction", "ignoring an empty instruction on ~/instruction")
            return
        result = self._node.set_parameters([Parameter("instruction", value=text)])[0]
        if not result.successful:
            self._warn("instruction", f"instruction rejected: {result.reason}")

    def _ask_cb(self, msg: String) -> None:
        self.submit(Question(msg.data))

    def submit(self, q: Question) -> bool:
        """Queue a question, or end it at once with a refusal. True when queued."""
        reason = None if q.prompt.strip() else INVALID + ": empty question"
        if reason is None:
            reason = self.questions.submit(q)
        if reason is None:
            return True
        self.refuse(q, reason)
        return False

    def refuse(self, q: Question, reason: str) -> None:
        """End `q` with a final refusal on ~/answer (and its goal), once."""
        if not self.questions.end(q, reason, time.monotonic()):
            return
        self._warn(f"ask:{reason[:20]}", f"question refused ({reason}): {q.prompt[:60]!r}")
        msg = self._pubs.refusal(q.prompt, reason, self._node.get_clock().now().to_msg(),
                                 q.request_id)
        if q.sink is not None:
            q.sink(msg)

    # -- worker side ------------------------------------------------------------------------------
    def hand_over(self, ask: Callable[[str], int]) -> None:
        """Give queued questions to the engine (`ask` returns the request id)."""
        for q in self.questions.take():
            try:
                rid = ask(q.prompt)
            except ValueError as exc:
                self.refuse(q, f"{INVALID}: {exc}")
                continue
            self.questions.asked(q, rid)

    def route(self, update: Any, stamp: Any) -> None:
        """Publish one request update; a question's final one retires it. Updates of a question
        that already ended (refused, aborted, cancelled) are not published: one final each."""
        if update.kind == "memory":
            self._pubs.text(update, stamp)
            return
        q = self.questions.finished(update.id) if update.is_final else self.questions.owner(update.id)
        if q is None:
            return
        msg = self._pubs.text(update, stamp)
        if q.sink is not None:
            q.sink(msg)

    def abort_all(self, reason: str) -> None:
        """End every open question with `reason` (deactivate, cleanup)."""
        for q in self.questions.drain():
            self.refuse(q, reason)
