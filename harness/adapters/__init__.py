"""The Harness under agent frameworks users already have (optional extras: `pip install harness-bench[adapters]`).

- `harness.adapters.pydantic_ai` — pydantic-ai (`pydantic-ai-slim`): `HarnessBridge` and `run_agent`.
- `harness.adapters.openai_agents` — the OpenAI Agents SDK (`openai-agents`): `HarnessAgentsModel` and `run_agent`.
- `_batch.py` — what both share: a whole assistant message answered at once, in order.

Each adapter routes every model call through `HarnessSession.complete` and every tool call, with its raw
arguments, through `HarnessSession.handle_tool_calls`; the framework's argument validation and retries never
see a protocol violation (the Harness answers it), and the final text goes to Release. The framework carries
every call under an id of the adapter's own (a catch-all tool for a name the agent has no tool for), so a
reused id or an unknown name reaches the Harness as the native loop's rejection, never the framework's error.
"""
