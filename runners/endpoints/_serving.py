"""What the bench's background HTTP servers (the simulator, the live check's recording proxy) share."""

from __future__ import annotations

__all__ = ["STOP_POLL_S"]

STOP_POLL_S = 0.05
"""How often a server's `serve_forever` looks for a shutdown request, in seconds: `stop()` returns within it (the
standard library's 0.5 s kept every stop waiting about a quarter of a second; a wake-up every 50 ms costs nothing)."""
