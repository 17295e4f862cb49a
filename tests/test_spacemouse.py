"""SpaceMouseDevice: HID report parsing (split and 6-axis layouts), deadzone, scaling, axis
mapping, buttons, disconnect; a fake HID device replays raw report bytes."""

from __future__ import annotations

import struct
import sys

import numpy as np
import pytest

from hardware.devices.device import DeviceDisconnected
from hardware.devices.spacemouse import (
    DEFAULT_AXES,
    DEFAULT_SIGNS,
    SpaceMouseDevice,
    apply_deadzone,
    find_spacemouse,
    open_hid,
    parse_report,
)

IDENTITY = {"axes": (0, 1, 2, 3, 4, 5), "signs": (1, 1, 1, 1, 1, 1), "deadzone": 0.0}


def translation(x: int, y: int, z: int) -> list[int]:
    return [1, *struct.pack("<3h", x, y, z)]


def rotation(rx: int, ry: int, rz: int) -> list[int]:
    return [2, *struct.pack("<3h", rx, ry, rz)]


def six_axis(*values: int) -> list[int]:
    return [1, *struct.pack("<6h", *values)]


def buttons(mask: int, n_bytes: int = 1) -> list[int]:
    return [3, *mask.to_bytes(n_bytes, "little")]


class FakeHid:
    """Replays queued reports; ``read`` returns [] when the queue is empty (non-blocking)."""

    def __init__(self) -> None:
        self.reports: list[list[int]] = []
        self.error: Exception | None = None
        self.reads: list[tuple[int, int]] = []

    def push(self, *reports: list[int]) -> None:
        self.reports.extend(reports)

    def read(self, size: int, timeout_ms: int) -> list[int]:
        self.reads.append((size, timeout_ms))
        if self.error is not None:
            raise self.error
        return self.reports.pop(0) if self.reports else []


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def make(**kw) -> tuple[SpaceMouseDevice, FakeHid, Clock]:
    fake, clock = FakeHid(), Clock()
    dev = SpaceMouseDevice(fake, clock=clock, **kw)
    dev.start()
    return dev, fake, clock


def test_parse_split_layout() -> None:
    raw = np.zeros(6)
    assert parse_report(translation(100, -200, 350), raw) is None
    assert parse_report(rotation(-1, 32767, -32768), raw) is None
    np.testing.assert_array_equal(raw, [100, -200, 350, -1, 32767, -32768])
    assert parse_report(buttons(0b101), raw) == 0b101
    assert parse_report(buttons(0x0201, 2), raw) == 0x0201  # two button bytes, little-endian
    assert parse_report([4, 1], raw) is None  # LED / other reports ignored
    np.testing.assert_array_equal(raw, [100, -200, 350, -1, 32767, -32768])


def test_parse_six_axis_report() -> None:
    raw = np.zeros(6)
    parse_report(six_axis(1, -2, 3, -4, 5, -6), raw)
    np.testing.assert_array_equal(raw, [1, -2, 3, -4, 5, -6])


def test_both_layouts_give_the_same_action() -> None:
    values = (175, -350, 70, 35, -105, 350)
    dev_a, fake_a, _ = make()
    fake_a.push(translation(*values[:3]), rotation(*values[3:]))
    dev_b, fake_b, _ = make()
    fake_b.push(six_axis(*values))
    np.testing.assert_array_equal(dev_a.read().action, dev_b.read().action)


def test_scaling_clipping_and_identity_mapping() -> None:
    dev, fake, _ = make(**IDENTITY)
    fake.push(six_axis(175, -350, 700, 35, -32768, 0))
    cmd = dev.read()
    np.testing.assert_allclose(cmd.action, [0.5, -1.0, 1.0, 0.1, -1.0, 0.0, -1.0], atol=1e-6)
    assert cmd.action.dtype == np.float32 and cmd.intervene


def test_deadzone_zeroes_small_and_rescales_large() -> None:
    np.testing.assert_allclose(
        apply_deadzone(np.array([0.05, -0.1, 0.55, -1.0]), 0.1), [0.0, 0.0, 0.5, -1.0]
    )
    dev, fake, _ = make(**{**IDENTITY, "deadzone": 0.1})
    fake.push(six_axis(30, -30, 20, 0, 0, 0))  # sensor noise at rest: < 10 % of 350
    cmd = dev.read()
    np.testing.assert_array_equal(cmd.action[:6], 0.0)
    assert not cmd.intervene
    fake.push(six_axis(350, 0, 0, 0, 0, 0))
    assert dev.read().action[0] == pytest.approx(1.0)


def test_default_mapping_into_base_frame() -> None:
    # HID frame: +x right, +y toward the user, +z down. Base: push away -> +x, left -> +y, up -> +z.
    dev, fake, _ = make(deadzone=0.0)
    cases = {
        (0, -350, 0, 0, 0, 0): 0,  # push away from the user
        (-350, 0, 0, 0, 0, 0): 1,  # push left
        (0, 0, -350, 0, 0, 0): 2,  # lift
        (0, 0, 0, 0, 0, -350): 5,  # twist counter-clockwise seen from above (about -z_hid)
    }
    for raw, axis in cases.items():
        fake.push(six_axis(*raw))
        expected = np.zeros(6)
        expected[axis] = 1.0
        np.testing.assert_allclose(dev.read().action[:6], expected, err_msg=str(raw))
    # The default map is a proper rotation: rotation vectors map like translations.
    perm = np.zeros((6, 6))
    perm[np.arange(6), DEFAULT_AXES] = DEFAULT_SIGNS
    assert np.linalg.det(perm[:3, :3]) == pytest.approx(1.0)
    np.testing.assert_array_equal(perm[:3, :3], perm[3:, 3:])


def test_custom_axes_and_signs_and_speeds() -> None:
    dev, fake, _ = make(
        axes=(2, 0, 1, 3, 5, 4),
        signs=(1, -1, 1, 1, 1, -1),
        deadzone=0.0,
        translation_speed=0.5,
        rotation_speed=0.25,
    )
    fake.push(six_axis(350, 175, -350, 350, 175, -350))
    np.testing.assert_allclose(dev.read().action[:6], [-0.5, -0.5, 0.25, 0.25, -0.25, -0.125])


def test_latest_report_wins_and_release_stops() -> None:
    dev, fake, _ = make(**IDENTITY)
    fake.push(translation(350, 0, 0), translation(0, 175, 0))
    np.testing.assert_allclose(dev.read().action[:3], [0.0, 0.5, 0.0])
    assert fake.reads[-1] == (64, 0)  # non-blocking reads, drained until empty
    fake.push(translation(0, 0, 0))
    cmd = dev.read()
    np.testing.assert_array_equal(cmd.action[:6], 0.0)
    assert not cmd.intervene


def test_gripper_button_toggles_on_press_edge() -> None:
    dev, fake, _ = make()
    fake.push(buttons(0b01))
    cmd = dev.read()
    assert cmd.action[6] == 1.0 and cmd.intervene
    fake.push(buttons(0b01))  # still held: no second toggle
    assert dev.read().action[6] == 1.0
    fake.push(buttons(0b00), buttons(0b01), buttons(0b00))  # a full click within one tick
    assert dev.read().action[6] == -1.0
    assert dev.read().action[6] == -1.0  # kept with no input


def test_deadman_button_and_require_deadman() -> None:
    dev, fake, _ = make(**IDENTITY)
    fake.push(buttons(0b10))
    cmd = dev.read()
    assert cmd.intervene and cmd.action[6] == -1.0  # held deadman: intervene without motion
    fake.push(buttons(0b00))
    assert not dev.read().intervene

    dev, fake, _ = make(**IDENTITY, require_deadman=True)
    fake.push(translation(350, 0, 0))
    cmd = dev.read()
    assert cmd.action[0] == 0.0 and not cmd.intervene
    fake.push(buttons(0b10))
    cmd = dev.read()
    assert cmd.action[0] == 1.0 and cmd.intervene


def test_button_events() -> None:
    dev, fake, _ = make(button_events={2: "success", 9: "quit"})
    fake.push(buttons(1 << 2 | 1 << 9, 2))
    assert dev.read().events == {"success", "quit"}
    fake.push(buttons(1 << 2 | 1 << 9, 2))
    assert dev.read().events == frozenset()


def test_motion_timeout_drops_a_silent_deflection() -> None:
    dev, fake, clock = make(**IDENTITY, motion_timeout=0.5)
    fake.push(translation(350, 0, 0))
    assert dev.read().action[0] == 1.0
    clock.t = 0.4
    assert dev.read().action[0] == 1.0
    clock.t = 0.6
    fake.push(buttons(0))  # button reports don't count as axis reports
    cmd = dev.read()
    assert cmd.action[0] == 0.0 and not cmd.intervene
    fake.push(translation(350, 0, 0))
    assert dev.read().action[0] == 1.0


def test_read_error_is_a_sticky_disconnect() -> None:
    dev, fake, _ = make(**IDENTITY)
    fake.push(translation(350, 0, 0))
    assert dev.read().action[0] == 1.0
    fake.error = OSError("read error")
    with pytest.raises(DeviceDisconnected, match="read error"):
        dev.read()
    fake.error = None
    with pytest.raises(DeviceDisconnected):
        dev.read()  # never falls back to the last deflection
    dev.stop()
    dev.stop()


def test_injected_device_is_not_closed_and_restart_clears_state() -> None:
    dev, fake, _ = make(**IDENTITY)
    fake.push(translation(350, 0, 0))
    dev.read()
    dev.stop()
    dev.start()
    np.testing.assert_array_equal(dev.read().action[:6], 0.0)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"deadzone": 1.0}, "deadzone"),
        ({"axes": (0, 1, 3, 2, 4, 5)}, "permutation"),
        ({"signs": (1, 1, 1, 1, 1, 0.5)}, "signs"),
        ({"translation_speed": 0.0}, "translation_speed"),
        ({"button_events": {3: "explode"}}, "button_events"),
        ({"button_events": {0: "quit"}}, "distinct"),
        ({"intervention_button": None, "require_deadman": True}, "require_deadman"),
        ({"motion_timeout": 0.0}, "motion_timeout"),
    ],
)
def test_bad_arguments(kw: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SpaceMouseDevice(FakeHid(), **kw)


def test_find_spacemouse_filters_vendors_and_prefers_multi_axis_interface() -> None:
    entries = [
        {"vendor_id": 0x046D, "product_id": 0xC52B, "path": b"logitech-receiver"},
        {"vendor_id": 0x256F, "product_id": 0xC652, "usage_page": 12, "usage": 1, "path": b"a"},
        {"vendor_id": 0x256F, "product_id": 0xC652, "usage_page": 1, "usage": 8, "path": b"b"},
        {"vendor_id": 0x046D, "product_id": 0xC626, "usage_page": 1, "usage": 8, "path": b"c"},
        {"vendor_id": 0x1234, "product_id": 0xC626, "path": b"other"},
    ]
    assert [e["path"] for e in find_spacemouse(lambda: entries)] == [b"b", b"c", b"a"]


def test_missing_hidapi_raises_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "hid", None)  # makes `import hid` raise ImportError
    with pytest.raises(ImportError, match=r'pip install -e "\.\[teleop\]"'):
        open_hid()
    with pytest.raises(ImportError, match="hidapi"):
        SpaceMouseDevice().start()
