"""Regenerate docs/config.md from the config models and the CLI's option table: python3 docs/gen_config_md.py
(from the repo root)."""

from pathlib import Path

from fte_shell.cli.options import flags_markdown
from fte_shell.config import reference_toml

HEAD = """# Configuration reference

One TOML file, given with `--config FILE`, whose tables mirror the pydantic models of the package
`fte_shell/config/` (`[model]` ModelConfig, `[agent]` AgentConfig, `[sandbox]` SandboxConfig,
`[sandbox.fetch_policy]` FetchPolicy, `[search]` SearchConfig, `[snapshot]` SnapshotConfig, `[judge]` JudgeOptions,
`[benchmark]` BenchmarkOptions). Precedence:
defaults < the file < environment (`OPENAI_BASE_URL`, `OPENAI_MODEL` and every secret of `config/secrets.py`: `OPENAI_API_KEY`,
`SERPER_API_KEY`, `FTE_EMBEDDINGS_API_KEY`) <
command-line flags. Unknown keys are an error that names the key. In Python: `fte_shell.load_config(path,
overrides)` or build the models directly (`RunConfig(sandbox=SandboxConfig(memory="2g"))`).

## Command-line flags

`run`, `bench`, `shell`, `demo` and `judge` take their configuration flags from one table
(`fte_shell/cli/options.py`); each flag sets one option below (its help is the option's docstring):

"""

REFERENCE = """
## Every option

This is the output of `fte-shell config` (a test keeps the two identical); every option with its default:

```toml
"""

Path("docs/config.md").write_text(HEAD + flags_markdown() + REFERENCE + reference_toml() + "```\n")
