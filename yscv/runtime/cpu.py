"""What this machine is: the CPU's model and SIMD extensions, its family name
for benchmark tables, and one line naming it beside a figure."""
from __future__ import annotations

from . import threads
from .blas import blas_info, blas_threads
from .environment import _ENV, usable_cores

def cpu_info() -> dict:
    """``{"model": ..., "isa": "avx512f avx2 fma"}`` from /proc/cpuinfo (the
    SIMD extensions that matter to the kernels and to BLAS), or what the
    platform module knows elsewhere."""
    import platform

    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, val = line.partition(":")
                key = key.strip()
                if key == "model name" and model in ("", platform.machine(), platform.processor()):
                    model = val.strip()
                elif key == "flags" and not flags:
                    flags = set(val.split())
    except OSError:
        pass
    isa = " ".join(f for f in ("avx512f", "avx512_bf16", "amx_tile", "avx2", "fma", "neon", "asimd")
                   if f in flags)
    return {"model": model, "isa": isa}


def machine_line() -> str:
    """One line naming the machine a figure was measured on: CPU model and
    ISA, cores, NumPy's BLAS and the kernels it runs (and whether
    ``OPENBLAS_CORETYPE`` forces them), BLAS and yscv threads."""
    cpu, blas = cpu_info(), blas_info()
    forced = _ENV["OPENBLAS_CORETYPE"]
    config = blas["config"].split()
    name = " ".join(config[:2]) if config else "BLAS unknown"
    core = blas["core"] + (f" (forced by OPENBLAS_CORETYPE={forced})" if forced else "")
    return (f"{cpu['model']} [{cpu['isa']}], {usable_cores()} cores; NumPy {_numpy_version()} "
            f"with {name}, {core or 'core unknown'} kernels, {blas_threads()} BLAS threads; "
            f"yscv {threads.get_num_threads()} threads")


_X86_VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd", "HygonGenuine": "hygon",
                "CentaurHauls": "centaur"}
#: ARM's "CPU implementer" codes, and a few of Arm's own "CPU part" codes
_ARM_IMPLEMENTERS = {0x41: "arm", 0x42: "broadcom", 0x43: "cavium", 0x46: "fujitsu",
                     0x48: "hisilicon", 0x4E: "nvidia", 0x50: "apm", 0x51: "qualcomm",
                     0x61: "apple", 0x6D: "microsoft", 0xC0: "ampere"}
_ARM_PARTS = {0xD0C: "neoverse-n1", 0xD40: "neoverse-v1", 0xD49: "neoverse-n2",
              0xD4F: "neoverse-v2", 0xD8E: "neoverse-n3", 0xD84: "neoverse-v3"}
#: words of a model name that name no family (vendors, marks, hypervisors)
_NOT_A_FAMILY = {"intel", "amd", "gen", "cpu", "processor", "common", "kvm", "qemu", "virtual",
                 "version", "genuine", "authentic", "hygon", "centaur", "with", "radeon",
                 "graphics", "mobile"}


def _first_cpu_fields(text: str) -> dict:
    """``key -> value`` of the first processor's lines of a /proc/cpuinfo text
    (later processors repeat them)."""
    fields: dict = {}
    for line in text.splitlines():
        key, sep, val = line.partition(":")
        key = key.strip()
        if not line.strip():
            if "processor" in fields and len(fields) > 1:
                break
            continue
        if sep and key not in fields:
            fields[key] = val.strip()
    return fields


def _isa_level(flags: set) -> str:
    """The widest SIMD level the kernels and BLAS can use, from the CPU's
    flags (x86 ``flags`` or ARM ``Features``)."""
    for flag, level in (("avx512f", "avx512"), ("avx2", "avx2"), ("avx", "avx"),
                        ("sse4_2", "sse4"), ("sve2", "sve2"), ("sve", "sve"),
                        ("asimd", "neon"), ("neon", "neon")):
        if flag in flags:
            return level
    return ""


def _slug(*words: str) -> str:
    import re

    text = "-".join(w for w in words if w).lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")


def machine_family(cpuinfo: str | None = None) -> str:
    """A short name for the kind of machine a benchmark ran on: vendor,
    model family and SIMD level, e.g. ``"amd-epyc-avx512"``,
    ``"intel-xeon-avx512"``, ``"intel-core-avx2"``,
    ``"arm-neoverse-v1-sve"`` (lower case letters, digits and hyphens).

    ``cpuinfo`` is the text of /proc/cpuinfo (read when None); only the
    first processor's lines count. Where there is none (macOS, Windows)
    the name is the platform's system and machine, e.g. ``"darwin-arm64"``."""
    import platform
    import re

    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                cpuinfo = f.read()
        except OSError:
            cpuinfo = ""
    fields = _first_cpu_fields(cpuinfo)
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    if "CPU implementer" in fields:
        try:
            implementer = int(fields["CPU implementer"], 16)
            part = int(fields.get("CPU part", "0"), 16)
        except ValueError:
            implementer, part = -1, 0
        vendor = _ARM_IMPLEMENTERS.get(implementer, f"implementer-{implementer:x}")
        family = _ARM_PARTS.get(part, f"part-{part:x}") if implementer == 0x41 else f"part-{part:x}"
        return _slug(vendor, family, _isa_level(flags))
    if "vendor_id" in fields or "model name" in fields:
        vendor_id = fields.get("vendor_id", "")
        vendor = _X86_VENDORS.get(vendor_id, vendor_id)
        model = re.sub(r"\((r|tm)\)", " ", fields.get("model name", ""), flags=re.IGNORECASE)
        words = [w for w in re.split(r"[^A-Za-z0-9]+", model.lower())
                 if w.isalpha() and w not in _NOT_A_FAMILY]
        return _slug(vendor or "cpu", words[0] if words else "cpu", _isa_level(flags))
    return _slug(platform.system() or "unknown", platform.machine())


def _numpy_version() -> str:
    import numpy as np

    return np.__version__
