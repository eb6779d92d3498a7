#!/usr/bin/env python3
"""A small knowledge-base MCP server for anima: JSON-RPC 2.0 over stdio, standard library only.

One read-only tool, `lookup`, finds the notes whose title or text contains a term. The notes
are in NOTES below; point KB_NOTES at a JSON file ({"title": "text", ...}) to use your own.

Try it: `anima tools list` with the config in docs/soul.md, or by hand:
  printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' | python3 kb_server.py
"""
import json
import os
import sys

NOTES = {
    "deploy": "Deploys go out from main every weekday at 10:00 UTC; `make release` tags them.",
    "on-call": "The on-call rota is in the ops channel topic; swaps need a day's notice.",
    "backups": "The database is backed up hourly; restores are tested on the first Monday of each month.",
}
if os.environ.get("KB_NOTES"):
    with open(os.environ["KB_NOTES"]) as f:
        NOTES = json.load(f)

LOOKUP = {
    "name": "lookup",
    "description": "Find the team's notes about a term (deploys, on-call, backups, ...)",
    "inputSchema": {
        "type": "object",
        "properties": {"term": {"type": "string", "description": "a word or two to look for"}},
        "required": ["term"],
        "additionalProperties": False,
    },
    "annotations": {"readOnlyHint": True},
}


def lookup(term):
    term = term.lower().strip()
    found = [f"{title}: {text}" for title, text in NOTES.items()
             if term in title.lower() or term in text.lower()]
    return "\n".join(found) if found else f"No notes mention {term!r}."


def answer(mid, result=None, error=None):
    msg = {"jsonrpc": "2.0", "id": mid}
    msg["error" if error else "result"] = error or result
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if "id" not in msg:  # a notification (such as notifications/initialized)
        continue
    mid, method, params = msg["id"], msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        answer(mid, {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                     "serverInfo": {"name": "kb", "version": "1.0"}})
    elif method == "tools/list":
        answer(mid, {"tools": [LOOKUP]})
    elif method == "tools/call" and params.get("name") == "lookup":
        term = (params.get("arguments") or {}).get("term", "")
        answer(mid, {"content": [{"type": "text", "text": lookup(term)}]})
    elif method == "ping":
        answer(mid, {})
    else:
        answer(mid, error={"code": -32601, "message": f"unknown method or tool: {method}"})
