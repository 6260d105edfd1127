"""What the agent sees of one shell command: :class:`Observation` and its rendering."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Observation:
    """The result of one command, as the agent (and the researcher) sees it."""

    output: str
    """Merged stdout+stderr, decoded, cleaned and capped (head + tail with the omitted count)."""
    exit_code: int | None
    """The command's exit status (128+N when killed by signal N); None when it timed out or did not run."""
    timed_out: bool = False
    """The command hit its timeout and its processes were killed."""
    truncated: bool = False
    """The output was longer than the cap and its middle was omitted."""
    duration_s: float = 0.0
    """Wall-clock seconds from sending the command to having its observation."""
    restarted: bool = False
    """The shell died (or was wedged) and a fresh one was started in the previous working directory."""
    timeout_s: float | None = None
    """The timeout that applied (for the note)."""
    note: str = ""
    """Extra information for the agent (e.g. the output buffer filled up, the budget is spent)."""

    def render(self) -> str:
        """The text the model sees: the output, then one note per unusual event."""
        parts = [self.output.rstrip("\n")] if self.output.strip() else ["(no output)"]
        if self.timed_out:
            t = f"{self.timeout_s:g} s" if self.timeout_s is not None else "its time limit"
            parts.append(f"[timed out after {t}; the process was killed; partial output above]")
        elif self.exit_code not in (0, None):
            parts.append(f"[exit code {self.exit_code}]")
        if self.restarted:
            parts.append(
                "[the shell was restarted (it exited or had to be killed): the working directory was kept; "
                "shell variables, functions and aliases were reset]"
            )
        if self.note:
            parts.append(f"[{self.note}]")
        return "\n".join(parts)


def container_size(text: str) -> int:
    """Bytes of a docker size string like ``16m`` (0 when unparsable)."""
    t = text.strip().lower().rstrip("b")
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(t[-1:], 1)
    try:
        return int(float(t[:-1] if t[-1:] in "kmg" else t) * mult)
    except ValueError:
        return 0
