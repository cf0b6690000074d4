"""The control tick's middleware calls with the interpreter lock released: rcl's serialized
publish and take called through ctypes.

rclpy holds the GIL for the whole of `Publisher.publish` (rcl_publish_serialized_message) and
`take_message` (rcl_take_serialized_message): a thread counting in Python runs at half its rate
while another thread publishes or takes in a loop, as beside pure Python, and at its full rate
beside a call that releases the lock. On the node those two calls are the control tick's
middleware work 200-500 times a second, about a quarter of the tick under a humanoid's load
(~45 us take + ~80 us publish of ~480 us, `oxygen-bench humanoid-io`), and the model's thread
waits for every microsecond the tick holds the lock. A ctypes call into a C library releases the
lock for its duration, so the same rcl functions called through ctypes let the model's Python
run meanwhile. Nothing else changes: the same rcl publisher and subscription (rclpy's, by their
`handle.pointer`), the same bytes, the same message info.

It is used only where a probe in this process passed (`Probe.run`, once per process): a message
published through it and taken by rclpy, and one published by rclpy and taken through it, are
the bytes sent, with the message info rclpy reports (the same publisher, consecutive sequence
numbers, plausible times). Anything else (rcl not loaded under its soname, another struct layout
in another ROS distribution, a middleware that gives no message info) keeps rclpy's calls; the
node says which it uses (`oxygen: control`, `middleware_calls`).
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
from typing import Any

RCL_RET_OK = 0
RCL_RET_SUBSCRIPTION_TAKE_FAILED = 401  # rcl/types.h: nothing to take
GID_SIZE = 16  # RMW_GID_STORAGE_SIZE since Iron (24 before: the probe refuses it)
INFO_BYTES = 256  # room for rmw_message_info_t whatever its layout (the probe checks the fields)


class _Allocator(ctypes.Structure):  # rcutils_allocator_t
    _fields_ = [("allocate", ctypes.c_void_p), ("deallocate", ctypes.c_void_p),
                ("reallocate", ctypes.c_void_p), ("zero_allocate", ctypes.c_void_p),
                ("state", ctypes.c_void_p)]


class _Bytes(ctypes.Structure):  # rcutils_uint8_array_t (= rmw / rcl_serialized_message_t)
    _fields_ = [("buffer", ctypes.POINTER(ctypes.c_uint8)), ("buffer_length", ctypes.c_size_t),
                ("buffer_capacity", ctypes.c_size_t), ("allocator", _Allocator)]


class _Gid(ctypes.Structure):  # rmw_gid_t
    _fields_ = [("implementation_identifier", ctypes.c_char_p), ("data", ctypes.c_uint8 * GID_SIZE)]


class _MessageInfo(ctypes.Structure):  # rmw_message_info_t
    _fields_ = [("source_timestamp", ctypes.c_int64), ("received_timestamp", ctypes.c_int64),
                ("publication_sequence_number", ctypes.c_uint64),
                ("reception_sequence_number", ctypes.c_uint64), ("publisher_gid", _Gid),
                ("from_intra_process", ctypes.c_bool)]


class Rcl:
    """The process's already loaded librcl and librcutils (never a second copy: RTLD_NOLOAD)."""

    def __init__(self) -> None:
        mode = os.RTLD_NOLOAD | os.RTLD_GLOBAL
        rcl = ctypes.CDLL("librcl.so", mode=mode)
        rcutils = ctypes.CDLL("librcutils.so", mode=mode)
        self.publish = rcl.rcl_publish_serialized_message
        self.publish.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Bytes), ctypes.c_void_p]
        self.publish.restype = ctypes.c_int
        self.take = rcl.rcl_take_serialized_message
        self.take.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Bytes), ctypes.c_void_p,
                              ctypes.c_void_p]
        self.take.restype = ctypes.c_int
        self.default_allocator = rcutils.rcutils_get_default_allocator
        self.default_allocator.argtypes = []
        self.default_allocator.restype = _Allocator
        self.init = rcutils.rcutils_uint8_array_init
        self.init.argtypes = [ctypes.POINTER(_Bytes), ctypes.c_size_t, ctypes.POINTER(_Allocator)]
        self.init.restype = ctypes.c_int
        self.fini = rcutils.rcutils_uint8_array_fini
        self.fini.argtypes = [ctypes.POINTER(_Bytes)]
        self.fini.restype = ctypes.c_int


class UnlockedPublisher:
    """Publishes serialized messages on an rclpy publisher's rcl publisher, the GIL released.
    Publishes only while rclpy would (a lifecycle publisher: while activated)."""

    def __init__(self, rcl: Rcl, publisher: Any) -> None:
        self._rcl, self.publisher = rcl, publisher
        self._handle = publisher.handle
        self._pointer = self._handle.pointer
        self._msg = _Bytes()
        self._keep: ctypes.Array | None = None  # the buffer the message points at

    def publish(self, data: bytes) -> None:
        if not getattr(self.publisher, "is_activated", True):
            return  # rclpy's lifecycle publisher drops (and warns about) the same publish
        n = len(data)
        if self._keep is None or len(self._keep) < n:
            self._keep = (ctypes.c_uint8 * n)()
            self._msg.buffer = ctypes.cast(self._keep, ctypes.POINTER(ctypes.c_uint8))
            self._msg.buffer_capacity = n
        ctypes.memmove(self._keep, data, n)
        self._msg.buffer_length = n
        with self._handle:
            rc = self._rcl.publish(self._pointer, ctypes.byref(self._msg), None)
        if rc != RCL_RET_OK:
            raise RuntimeError(f"rcl_publish_serialized_message failed ({rc})")


class UnlockedTake:
    """Takes one serialized message from an rclpy subscription's rcl subscription, the GIL
    released: (bytes, message info as rclpy gives it) or None when there is none."""

    def __init__(self, rcl: Rcl, subscription: Any, capacity: int = 4096) -> None:
        self._rcl = rcl
        self._handle = subscription.handle
        self._pointer = self._handle.pointer
        self._msg = _Bytes()
        self._allocator = rcl.default_allocator()
        if rcl.init(ctypes.byref(self._msg), capacity, ctypes.byref(self._allocator)) != RCL_RET_OK:
            raise RuntimeError("rcutils_uint8_array_init failed")
        self._info = ctypes.create_string_buffer(INFO_BYTES)
        self._view = _MessageInfo.from_buffer(self._info)
        self._lock = threading.Lock()  # one buffer: one take at a time

    def take(self) -> tuple[bytes, dict] | None:
        with self._lock:
            if self._msg.buffer is None:
                return None  # closed
            with self._handle:
                rc = self._rcl.take(self._pointer, ctypes.byref(self._msg), self._info, None)
            if rc == RCL_RET_SUBSCRIPTION_TAKE_FAILED:
                return None
            if rc != RCL_RET_OK:
                raise RuntimeError(f"rcl_take_serialized_message failed ({rc})")
            data = ctypes.string_at(self._msg.buffer, self._msg.buffer_length)
            v = self._view
            return data, {
                "source_timestamp": v.source_timestamp,
                "received_timestamp": v.received_timestamp,
                "publication_sequence_number": v.publication_sequence_number,
                "publisher_gid": {"data": bytes(v.publisher_gid.data)}}

    def close(self) -> None:
        """Frees the buffer (the subscription is rclpy's: destroyed by its node)."""
        with self._lock:
            if self._msg.buffer is not None:
                self._rcl.fini(ctypes.byref(self._msg))
                self._msg.buffer = None


class Probe:
    """Whether the unlocked calls work in this process: run once, the answer kept."""

    _lock = threading.Lock()
    _result: tuple[Rcl | None, str] | None = None

    @classmethod
    def run(cls, node: Any) -> tuple[Rcl | None, str]:
        """(rcl, "") when the calls may be used; else (None, why not)."""
        with cls._lock:
            if cls._result is None:
                try:
                    cls._result = _probe(node)
                except Exception as exc:  # noqa: BLE001 - any failure: rclpy's calls
                    cls._result = (None, f"{type(exc).__name__}: {exc}")
            return cls._result


def _probe(node: Any) -> tuple[Rcl | None, str]:
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.serialization import serialize_message
    from std_msgs.msg import UInt64

    rcl = Rcl()
    topic = f"/_oxygen_rcl_probe_{os.getpid()}_{id(node):x}"
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    pub = node.create_publisher(UInt64, topic, qos)
    sub = node.create_subscription(UInt64, topic, lambda m: None, qos)
    take = None
    try:
        take = UnlockedTake(rcl, sub)
        first, second = serialize_message(UInt64(data=11)), serialize_message(UInt64(data=22))
        t0 = time.time_ns()
        UnlockedPublisher(rcl, pub).publish(first)
        pub.publish(second)
        deadline = time.monotonic() + 2.0
        got_rclpy = None
        while got_rclpy is None and time.monotonic() < deadline:
            with sub.handle:
                got_rclpy = sub.handle.take_message(sub.msg_type, True)
            if got_rclpy is None:
                time.sleep(0.005)
        got_ours = None
        while got_ours is None and time.monotonic() < deadline:
            got_ours = take.take()
            if got_ours is None:
                time.sleep(0.005)
        t1 = time.time_ns()
        if got_rclpy is None or got_ours is None:
            return None, "the probe's messages did not arrive within 2 s"
        (data_a, info_a), (data_b, info_b) = got_rclpy, got_ours
        if bytes(data_a) != first:
            return None, "a message published through rcl arrived changed"
        if data_b != second:
            return None, "a message taken through rcl is not the one sent"
        gid_a = (info_a.get("publisher_gid") or {}).get("data")
        if gid_a is None or bytes(gid_a)[:GID_SIZE] != info_b["publisher_gid"]["data"] \
                or len(bytes(gid_a)) != GID_SIZE:
            return None, "the message info's publisher id differs from rclpy's (another layout)"
        seq_a = info_a.get("publication_sequence_number")
        if not seq_a or info_b["publication_sequence_number"] != seq_a + 1:
            return None, "the message info's sequence numbers differ from rclpy's"
        for key in ("source_timestamp", "received_timestamp"):
            if not t0 - 1_000_000_000 <= info_b[key] <= t1 + 1_000_000_000:
                return None, f"the message info's {key} is not a time of this probe"
        return rcl, ""
    finally:
        if take is not None:
            take.close()
        node.destroy_subscription(sub)
        node.destroy_publisher(pub)
