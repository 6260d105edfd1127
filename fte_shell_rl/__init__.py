"""verifiers' plugin id for fte-shell's taskset: ``vf-eval fte-shell-rl``. verifiers 0.4.0's loader cannot
import a dotted id (``fte_shell.rl.verifiers``: its ``find_spec("verifiers.v1.tasksets.<id>")`` raises for
a dotted name), so the taskset, which lives in :mod:`fte_shell.rl.verifiers`, is named here under a
top-level one."""

from fte_shell.rl.verifiers import FteShellTaskset, HostChatHarness

__all__ = ["FteShellTaskset", "HostChatHarness"]
