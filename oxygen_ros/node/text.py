"""Text entering and leaving the node: ~/instruction, ~/ask (topic and action), and the routing
of request updates to ~/memory and ~/answer.

Text is checked where it enters, cheap bound first: a text longer than BYTES_PER_TOKEN bytes per
token of the model's prompt budget is refused without tokenizing; below that the engine decides
(Engine.check_question, Engine.validate_changes: the exact token count).
- ~/instruction sets the `instruction` parameter (the parameter callback checks it); a refused
  one leaves the previous instruction, with a throttled warning and a diagnostic.
- ~/ask (topic or action) queues a question (Questions); a refused question gets its final
  ~/answer at once (and its goal result). Questions arriving while the node is not active
  (`active()` false: inactive, or deactivated while they waited in the topic's queue) are
  refused (INACTIVE): deactivate ends every open question, and none waits for a later activation. route(): every engine request update goes to
  ~/memory or ~/answer; a question's final update retires it. A question whose goal is
  cancelled is aborted in the engine before the next frame.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.parameter import Parameter
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future

from std_msgs.msg import String

from oxygen_ros.action import Ask

from oxygen_ros.robot.engine_port import EnginePort

from .questions import CANCELLED, INACTIVE, INVALID, TOO_LONG, Question, Questions

# a burst of questions must queue in the subscription, not be dropped by it (KEEP_LAST)
ASK_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                     history=HistoryPolicy.KEEP_LAST)
BYTES_PER_TOKEN = 64  # generous: no tokenizer here has tokens this long
UNCONFIGURED_MAX_BYTES = 65536  # before configure the model (and its budget) is unknown
REFUSAL_WINDOW_S = 5.0  # a refused text keeps the inputs diagnostic WARN this long


def text_bound_reason(name: str, text: str, max_prompt_tokens: int | None) -> str | None:
    """The cheap check: a reason when `text` cannot fit the prompt budget, by its byte length."""
    limit = BYTES_PER_TOKEN * max_prompt_tokens if max_prompt_tokens else UNCONFIGURED_MAX_BYTES
    # a str never has fewer UTF-8 bytes than characters: len() alone settles huge texts
    n = len(text) if len(text) > limit else len(text.encode("utf-8", "surrogatepass"))
    if n > limit:
        budget = f"the model's {max_prompt_tokens}-token prompt budget" if max_prompt_tokens \
            else "any model's prompt budget"
        return f"{name} is {n} bytes: more than {limit} bytes cannot fit {budget}"
    return None


class TextIO:
    def __init__(self, node, publishers, questions: Questions, engine: EnginePort,
                 warn: Callable[[str, str], None],
                 active: Callable[[], bool] = lambda: True) -> None:
        self._node = node
        self._active = active
        self._pubs = publishers
        self.questions = questions
        self._engine = engine
        self._max_tokens = int(engine.model_config.max_prompt_tokens)
        self._warn = warn
        self._lock = threading.Lock()
        self._aborts: list[int] = []  # engine request ids to abort before the next frame
        self._goals: dict[int, Question] = {}  # id(goal handle) -> its question, while executing
        self.refusals: dict[str, tuple[float, str]] = {}  # topic -> (monotonic, reason)
        self._subs = [
            node.create_subscription(String, "~/instruction", self._instruction_cb, 10),
            node.create_subscription(String, "~/ask", self._ask_cb, ASK_QOS),
        ]
        self._action = ActionServer(node, Ask, "~/ask", execute_callback=self._execute,
                                    goal_callback=lambda goal: GoalResponse.ACCEPT,
                                    cancel_callback=self._cancel_cb)

    def destroy(self) -> None:
        for sub in self._subs:
            self._node.destroy_subscription(sub)
        self._subs.clear()
        self._action.destroy()

    # -- instruction ------------------------------------------------------------------------------
    def _instruction_cb(self, msg: String) -> None:
        text = msg.data.strip()
        if not text:
            self._note("~/instruction", "empty instruction ignored")
            return
        result = self._node.set_parameters([Parameter("instruction", value=text)])[0]
        if not result.successful:
            self._note("~/instruction", f"instruction refused, the previous one stays: {result.reason}")

    def _note(self, topic: str, reason: str) -> None:
        self.refusals[topic] = (time.monotonic(), reason)
        self._warn(f"text:{topic}", f"{topic}: {reason}")

    # -- questions ------------------------------------------------------------------------------
    def _ask_cb(self, msg: String) -> None:
        self.submit(Question(msg.data))

    def check(self, prompt: str) -> tuple[list[int], str | None]:
        """(the token ids Engine.ask takes, None), or ([], why `prompt` cannot be a question):
        the cheap bound, then the engine's check, which tokenises it (the only time)."""
        reason = text_bound_reason("question", prompt, self._max_tokens)
        if reason is None:
            try:
                return self._engine.check_question(prompt), None
            except ValueError as exc:
                reason = str(exc)
        return [], f"{INVALID}: {reason}" if not prompt.strip() else f"{TOO_LONG}: {reason}"

    def submit(self, q: Question) -> bool:
        """Queue a question, or end it at once with a refusal. True when queued."""
        reason = None if self._active() else INACTIVE
        if reason is None:
            q.prompt_ids, reason = self.check(q.prompt)
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
        if not self._node.context.ok():
            return  # the process is exiting (Ctrl-C): nothing can be delivered any more
        self._note("~/ask", f"question refused ({reason}): {q.prompt[:60]!r}")
        try:
            msg = self._pubs.refusal(q.prompt, reason, self._node.get_clock().now().to_msg(),
                                     q.request_id)
        except Exception:  # noqa: BLE001 - a shutdown racing this publish
            if self._node.context.ok():
                raise
            return
        if q.sink is not None:
            q.sink(msg)

    # -- the ~/ask action -------------------------------------------------------------------------
    async def _execute(self, goal_handle) -> Any:
        done: Future = Future(executor=self._node.executor)
        done.add_done_callback(lambda _: None)  # set_result from the worker wakes the executor

        def sink(msg) -> None:
            if msg.is_final:
                if not done.done():
                    done.set_result(msg)
            else:
                goal_handle.publish_feedback(Ask.Feedback(text=msg.text, token_count=msg.token_count))

        q = Question(goal_handle.request.question, sink=sink)
        self._goals[id(goal_handle)] = q
        try:
            self.submit(q)
            final = await done
        finally:
            self._goals.pop(id(goal_handle), None)
        result = Ask.Result(text=final.text, finish_reason=final.finish_reason,
                            request_id=final.request_id, token_count=final.token_count)
        if final.finish_reason == CANCELLED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        elif final.finish_reason.startswith(("refused", "aborted", "cancelled")):
            goal_handle.abort()
        else:
            goal_handle.succeed()
        return result

    def _cancel_cb(self, goal_handle) -> CancelResponse:
        q = self._goals.get(id(goal_handle))
        if q is None or q.done:
            return CancelResponse.REJECT
        if q.request_id:
            with self._lock:
                self._aborts.append(q.request_id)  # the worker aborts it in the engine
        self.refuse(q, CANCELLED)
        return CancelResponse.ACCEPT

    # -- worker side ------------------------------------------------------------------------------
    def hand_over(self, engine: EnginePort) -> None:
        """Before a frame: abort cancelled requests, give queued questions to the engine."""
        with self._lock:
            aborts, self._aborts = self._aborts, []
        for rid in aborts:
            engine.abort(rid)
        # only what the engine's waiting queue takes (one slot kept for this frame's memory
        # request): the rest waits here, bounded by ask.max_open, instead of being refused there
        room = engine.config.max_waiting_requests - engine.num_waiting_requests - 1
        for q in self.questions.take(room):
            try:
                rid = engine.ask(q.prompt, priority=1, prompt_ids=q.prompt_ids or None)
            except ValueError as exc:  # the engine's own refusal (e.g. its queue is full)
                self.refuse(q, f"refused: {exc}")
                continue
            if not self.questions.asked(q, rid):  # ended (cancelled) meanwhile
                engine.abort(rid)

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

    def abort_all(self, reason: str, engine: EnginePort | None = None) -> None:
        """End every open question with `reason` (deactivate, cleanup); with `engine` (its
        worker stopped) also drop them there."""
        for q in self.questions.drain():
            if engine is not None and q.request_id:
                engine.abort(q.request_id)
            self.refuse(q, reason)

    # -- diagnostics ----------------------------------------------------------------------------
    def problems(self) -> list[str]:
        now = time.monotonic()
        return [f"{topic}: {reason}" for topic, (t, reason) in list(self.refusals.items())
                if now - t < REFUSAL_WINDOW_S]

