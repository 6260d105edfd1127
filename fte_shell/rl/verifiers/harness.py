"""``HostChatHarness``: verifiers' own tool-calling chat loop (the ``null`` harness's program) run with the
host's Python, the one fte-shell runs in, instead of a ``uv``-built environment — so a rollout needs no
package download (the program's packages are fte-shell[rl]'s). The model's tools are the task's MCP
servers (fte-shell's profile tools); the rollout ends with the model's reply without a tool call."""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any

import verifiers.v1 as vf
from verifiers.v1.harnesses.null import NullHarness
from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE


class HostChatHarness(NullHarness):
    """The ``null`` harness's chat program, on the host interpreter (subprocess runtime only)."""

    async def setup(self, runtime: vf.Runtime) -> None:
        if runtime.type != "subprocess":
            raise ValueError("the fte-shell host chat harness runs on the host: use the subprocess runtime, "
                             "or another harness (--env.agent.harness.id null) in a container")

    async def launch(self, ctx: Any, trace: vf.Trace, runtime: vf.Runtime, endpoint: str, secret: str,
                     mcp_urls: dict[str, str], data: vf.TaskData, tool_interception_url: str | None = None
                     ) -> vf.ProgramResult:
        system, prompt = self.resolve_text_prompt(data)
        path = f"vf-chat-{uuid.uuid4().hex[:8]}.py"
        await runtime.write(path, CHAT_PROGRAM_SOURCE.encode())
        args = [f"--base-url={endpoint}", f"--api-key={secret}", f"--model={ctx.model}"]
        if tool_interception_url:
            args.append(f"--tool-interception-url={tool_interception_url}")
        if system:
            args.append(f"--system-prompt={system}")
        if prompt:
            args.append(f"--prompt={prompt}")
        if mcp_urls:
            servers = {n: {"url": u, "timeout": self.config.tool_timeout} for n, u in mcp_urls.items()}
            args.append("--mcp-config=" + json.dumps({"mcpServers": servers}))
        return await runtime.run_program([sys.executable, path, *args], dict(self.config.resolved_env))
