"""Where a release's CUDA user space comes from when its wheels bring none: conda packages
(profiles/conda.yaml) and NVIDIA's redist archives (profiles/cuda_redist.yaml). Plain data,
validated with file:line errors, and pure look-ups.

Read apart from the main knowledge (matrix/drivers/gpus): only the conda backend and
`--cuda-source redist` need these files, so `probe`/`plan` never parse them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tfgpu_install.knowledge.yaml_reader import VERSION2, VERSION_ANY, Checker, LList, read_yaml

CONDA_FILE = "conda.yaml"
REDIST_FILE = "cuda_redist.yaml"


@dataclass(frozen=True)
class CondaRecipe:
    cuda: str  # the TF build's CUDA major.minor: "11.2"
    cudnn: str  # what the specs give: "8.1"
    channel: str  # where the specs were looked up: "conda-forge"
    specs: tuple[str, ...]  # ("cudatoolkit=11.2", "cudnn=8.1.0")
    libraries: tuple[str, ...]  # sonames the env's lib/ must hold afterwards
    source: str

    def package_names(self) -> tuple[str, ...]:
        return tuple(spec_name(s) for s in self.specs)


@dataclass(frozen=True)
class RedistRecipe:
    cuda: str  # the TF build's CUDA major.minor
    release: str  # NVIDIA's redist label: redistrib_<release>.json ("11.8.0")
    components: tuple[str, ...]  # manifest keys: ("cuda_cudart", "libcublas", ...)
    libraries: tuple[str, ...]  # sonames the placed lib/ must hold
    source: str


def spec_name(spec: str) -> str:
    """The package name of a conda match spec: "cudnn=8.1.0" -> "cudnn", "conda-forge::x>=1" -> "x"."""
    name = spec.split("::")[-1]
    for sep in ("=", "<", ">", "!", " ", "["):
        name = name.split(sep)[0]
    return name.strip()


def source_file(directory: Optional[Path], name: str) -> tuple[Path, str]:
    """The file in `directory` (TFGPU_PROFILES_DIR) when it has one, else the packaged one: a
    site's knowledge dir need not copy these."""
    from tfgpu_install.knowledge.load import profiles_dir

    if directory is not None and (Path(directory) / name).is_file():
        return Path(directory) / name, str(Path(directory) / name)
    return profiles_dir() / name, f"profiles/{name}"


def _rows(path: Path, label: str, key: str) -> tuple[Checker, LList]:
    """The file's top-level `key:` list (and a `format:`), with file:line errors."""
    c = Checker(label)
    data = read_yaml(path, label)
    if data is None:
        c.fail(1, key, "the file is empty", f"it needs a top-level `{key}:` list")
    top = c.mapping(data, "", 1, required=(key,), optional=("format",))
    return c, c.seq(top[key], key, c.line_of(top, key))


def parse_conda(path: Path, label: str) -> tuple[CondaRecipe, ...]:
    c, rows = _rows(path, label, "recipes")
    out: list[CondaRecipe] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(rows):
        p = f"recipes[{i}]"
        row = c.mapping(raw, p, c.line_of(rows, i), ("cuda", "cudnn", "channel", "specs", "libraries", "source"))
        cuda = c.string(row, "cuda", f"{p}.cuda", pattern=VERSION2, example="11.2") or ""
        specs = c.strings(row, "specs", f"{p}.specs")
        for j, spec in enumerate(specs):
            if "=" not in spec or not spec_name(spec):
                c.fail(c.line_of(row, "specs"), f"{p}.specs[{j}]", f"expected name=version, got {spec!r}",
                       "pin every package to a version the channel publishes (see source)")
        if cuda in seen:
            c.fail(row.line, f"{p}.cuda", f"duplicate CUDA {cuda} (first at line {seen[cuda]})")
        seen[cuda] = row.line
        out.append(CondaRecipe(
            cuda=cuda,
            cudnn=c.string(row, "cudnn", f"{p}.cudnn", pattern=VERSION2, example="8.1") or "",
            channel=c.string(row, "channel", f"{p}.channel") or "",
            specs=specs,
            libraries=c.strings(row, "libraries", f"{p}.libraries"),
            source=c.string(row, "source", f"{p}.source") or "",
        ))
    return tuple(out)


def parse_redist(path: Path, label: str) -> tuple[RedistRecipe, ...]:
    c, rows = _rows(path, label, "releases")
    out: list[RedistRecipe] = []
    for i, raw in enumerate(rows):
        p = f"releases[{i}]"
        row = c.mapping(raw, p, c.line_of(rows, i), ("cuda", "release", "components", "libraries", "source"))
        out.append(RedistRecipe(
            cuda=c.string(row, "cuda", f"{p}.cuda", pattern=VERSION2, example="11.8") or "",
            release=c.string(row, "release", f"{p}.release", pattern=VERSION_ANY, example="11.8.0") or "",
            components=c.strings(row, "components", f"{p}.components"),
            libraries=c.strings(row, "libraries", f"{p}.libraries"),
            source=c.string(row, "source", f"{p}.source") or "",
        ))
    return tuple(out)


def load_conda_recipes(directory: Optional[Path] = None) -> tuple[CondaRecipe, ...]:
    path, label = source_file(directory, CONDA_FILE)
    return parse_conda(path, label)


def load_redist_recipes(directory: Optional[Path] = None) -> tuple[RedistRecipe, ...]:
    path, label = source_file(directory, REDIST_FILE)
    return parse_redist(path, label)


def conda_recipe_for(recipes: tuple[CondaRecipe, ...], cuda: Optional[str]) -> Optional[CondaRecipe]:
    """The row for a build's CUDA major.minor ("11.2"), or None."""
    want = ".".join((cuda or "").split(".")[:2])
    return next((r for r in recipes if r.cuda == want), None)


def redist_recipe_for(recipes: tuple[RedistRecipe, ...], cuda: Optional[str]) -> Optional[RedistRecipe]:
    want = ".".join((cuda or "").split(".")[:2])
    return next((r for r in recipes if r.cuda == want), None)
