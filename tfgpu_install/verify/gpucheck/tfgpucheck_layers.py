"""The verification layers: the one place a layer's name, order, needs and hint are written.

stdlib only: check.py imports it by file name inside the target env, and the host side
(tfgpu_install.verify.host, hostcheck, the report, doctor) imports it by its package path, as the
resolver does with tfgpucheck_arch. Everything else addresses a layer by its name; the number in
the check's JSON ("layer": N) is the position in LAYERS, derived here.

To add a layer: add a row below and its implementation in check.py's `implementations`; a library layer
names the env wheel its libraries come from (`wheel`), which is how doctor examines it (doctor/
verify_layers.py reads the same row; a GPU layer without one is "not checked" there, never passed).
"""

from __future__ import annotations

from typing import NamedTuple, Optional


class Layer(NamedTuple):
    name: str
    needs: str  # "gpu": a GPU layer (skipped in a CPU-only env); "tensorflow": TF in the env; "opt-in": asked for
    host: bool  # runs without an env (`verify --host-only`, scripts/gpu-check.sh)
    default: bool  # runs when no --layers is given
    hint: str  # what to look at when the check dies inside this layer
    wheel: str = ""  # a library layer: the env's wheel behind it ("nvidia-cudnn", any -cuXX suffix)


_DRIVER_HINT = "a hung or crashing driver: check `nvidia-smi` and `dmesg | grep -i xid`"
LAYERS: tuple[Layer, ...] = (
    Layer("hardware", "gpu", True, True, "run the check by hand: <env>/bin/python <tfgpu_install>/verify/gpucheck/"
          "check.py"),
    Layer("driver", "gpu", True, True, _DRIVER_HINT),
    Layer("cuda-runtime", "gpu", True, True, _DRIVER_HINT, wheel="nvidia-cuda-runtime"),
    Layer("cudnn", "gpu", True, True, "cuDNN died while loading: a missing cuDNN 9 sub-library (libcudnn_graph.so.9 "
          "...) makes cudnnGetVersion abort; re-run `tfgpu-install` to reinstall the nvidia-cudnn wheel",
          wheel="nvidia-cudnn"),
    Layer("cublas", "gpu", True, True, _DRIVER_HINT, wheel="nvidia-cublas"),
    Layer("tensorflow", "tensorflow", False, True,
          "TensorFlow died: see the captured log below, or run `tfgpu-install doctor --log FILE`"),
    Layer("benchmark", "opt-in", True, False, _DRIVER_HINT),
)
NAMES: tuple[str, ...] = tuple(lay.name for lay in LAYERS)


def number(name: str) -> int:
    """A layer's position (the "layer" key of the check's JSON); KeyError for an unknown name."""
    try:
        return NAMES.index(name)
    except ValueError:
        raise KeyError(f"unknown layer {name!r} (known: {', '.join(NAMES)})") from None


def by_number(num: int) -> Optional[Layer]:
    return LAYERS[num] if 0 <= num < len(LAYERS) else None


def named(name: str) -> Layer:
    return LAYERS[number(name)]


def host_layers() -> tuple[str, ...]:
    """The layers `verify --host-only` runs: the GPU layers, no env."""
    return tuple(lay.name for lay in LAYERS if lay.host and lay.default)


def default_layers() -> tuple[str, ...]:
    return tuple(lay.name for lay in LAYERS if lay.default)


def gpu_layers() -> tuple[str, ...]:
    return tuple(lay.name for lay in LAYERS if lay.needs == "gpu")


def parse_selection(text: str) -> set[str]:
    """--layers "hardware,driver" (names; numbers still accepted, mapped through the table) -> names."""
    out: set[str] = set()
    for item in (x.strip() for x in text.split(",") if x.strip()):
        if item.isdigit():
            lay = by_number(int(item))
            if lay is None:
                raise KeyError(f"unknown layer {item!r} (known: {', '.join(NAMES)})")
            out.add(lay.name)
        else:
            out.add(named(item).name)
    return out
