"""Reading a process's /proc/<pid>/status in the container tests: its fields, and the
capability masks it shows (hex, as the kernel prints them)."""

from __future__ import annotations

# Linux capability numbers (include/uapi/linux/capability.h) of the capabilities an
# agent server holds, for good or until its egress guard is in place.
CAP_NUMBERS = {
    "CHOWN": 0,
    "DAC_OVERRIDE": 1,
    "KILL": 5,
    "SETGID": 6,
    "SETUID": 7,
    "SETPCAP": 8,
    "NET_ADMIN": 12,
}


def cap_mask(names: tuple[str, ...]) -> str:
    """The mask /proc/<pid>/status shows for exactly ``names``."""
    return format(sum(1 << CAP_NUMBERS[name] for name in names), "016x")


def proc_status(text: str) -> dict[str, str]:
    """The fields of a status file's text (or of some of its lines)."""
    pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in pairs}
