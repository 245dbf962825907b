"""What a run reports: per-backend summaries, the JSON file, GraphNet's log form and the
table printed at the end."""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any, Dict, List, Sequence, Tuple

from . import scores

JSON_VERSION = 1
#: the prefix of every line of GraphNet's logs (its parsers search the rest of the line)
LOG_PROMPT = "graph-net-test-compiler-log"


def summarize(
    results: Sequence[Dict[str, Any]], backends: Sequence[str], tolerances: Sequence[int]
) -> Dict[str, Any]:
    """Per backend: how many samples, how many ran without error, the errors by kind, the
    geometric-mean speedup of those, and S(t) and ES(t) at every level."""
    out: Dict[str, Any] = {}
    for backend in backends:
        mine = [r for r in results if r["backend"] == backend]
        ok = [r for r in mine if r["error"] is None and r["speedup"] is not None]
        errors = Counter(r["error"]["kind"] for r in mine if r["error"] is not None)
        s = scores.s_scores(mine, tolerances)
        es = scores.es_scores(mine, tolerances)
        out[backend] = {
            "samples": len(mine),
            "ok": len(ok),
            "errors": dict(sorted(errors.items())),
            "geomean_speedup": scores.geomean(r["speedup"] for r in ok),
            "slowdowns": sum(1 for r in ok if r["speedup"] < 1),
            #: samples with a graph that ran on the paddle backend instead (a fallback)
            "fallbacks": sum(1 for r in mine if r.get("fallbacks")),
            #: samples whose timed calls or time limit followed their eager call's cost
            "scaled": sum(1 for r in mine if (r.get("limits") or {}).get("scaled")),
            "S": {str(t): v for t, v in s.items()},
            "ES": {str(t): v for t, v in es.items()},
        }
    return out


def write_json(path, config: Dict[str, Any], results, summary) -> None:
    """The run as JSON into ``path``, a file name or an open text stream."""
    if not isinstance(path, str):
        _dump_json(path, config, results, summary)
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        _dump_json(f, config, results, summary)


def _dump_json(f, config: Dict[str, Any], results, summary) -> None:
    data = {"version": JSON_VERSION, "config": config, "results": list(results), "summary": summary}
    json.dump(data, f, indent=1)
    f.write("\n")


#: the settings a resumed run must share with the run it resumes
RESUME_SETTINGS = ("tolerances", "warmup", "trials", "seed")


class Journal:
    """``<json>.partial``: the results of a run as they arrive, one JSON line each after a
    line of the run's settings, so that ``jit-eval --resume`` goes on where an interrupted
    run stopped. Removed once the final JSON is written."""

    def __init__(self, json_path: str, settings: Dict[str, Any]):
        self.path = json_path + ".partial"
        self.settings = {k: settings[k] for k in RESUME_SETTINGS}

    def earlier(self, json_path: str) -> Dict[Tuple[str, str], Dict[str, Any]]:
        """The results of the run to resume, by (sample, backend): from the final JSON of a
        finished run, then from this journal; an error naming the setting where they were
        made with other settings."""
        found: Dict[Tuple[str, str], Dict[str, Any]] = {}
        if os.path.exists(json_path):
            with open(json_path, encoding="utf-8") as f:
                data = json.load(f)
            self._same_settings(data.get("config", {}), json_path)
            for r in data.get("results", []):
                found[(r["sample"], r["backend"])] = r
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as f:
                lines = [line for line in f.read().splitlines() if line.strip()]
            if lines:
                self._same_settings(json.loads(lines[0]).get("settings", {}), self.path)
            for line in lines[1:]:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue  # a line cut short when the run was interrupted
                found[(r["sample"], r["backend"])] = r
        return found

    def _same_settings(self, settings: Dict[str, Any], where: str) -> None:
        for key in RESUME_SETTINGS:
            if key in settings and settings[key] != self.settings[key]:
                raise ValueError(
                    f"cannot resume {where}: it was run with {key}={settings[key]!r}, this "
                    f"run has {self.settings[key]!r} (run without --resume to start over)"
                )

    def start(self, keep: Dict[Tuple[str, str], Dict[str, Any]]) -> None:
        """Begin the journal: the settings, then the results kept from earlier."""
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(json.dumps({"settings": self.settings}) + "\n")
            for r in keep.values():
                f.write(json.dumps(r) + "\n")

    def add(self, result: Dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(result) + "\n")

    def close(self) -> None:
        if os.path.exists(self.path):
            os.remove(self.path)


def graphnet_log_lines(result: Dict[str, Any], config: Dict[str, Any]) -> List[str]:
    """One result in the form GraphNet's test_compiler prints and its analysis scripts
    parse (``[Processing]``, ``[Config]``, ``[Datatype]``, ``[Shape]``, ``[Correctness]``,
    ``[Performance]``, ``[Speedup]`` lines): its status is read back as ours."""
    p = LOG_PROMPT
    # the calls this sample was timed with, where its cost changed them
    limits = result.get("limits") or {}
    lines = [
        f"{p} [Processing] {result['sample']}",
        f"{p} [Config] model: {result['name']}",
        f"{p} [Config] device: {config.get('device', 'cpu')}",
        f"{p} [Config] compiler: {result['backend']}",
        f"{p} [Config] warmup: {limits.get('warmup', config.get('warmup'))}",
        f"{p} [Config] trials: {limits.get('trials', config.get('trials'))}",
    ]
    status = result["status"]
    error = result["error"]
    gn = result.get("graphnet") or {}
    eager_types = " ".join(gn.get("dtypes_eager", []))
    compiled_types = " ".join(gn.get("dtypes_compiled", []))
    if status == scores.EAGER_FAIL:
        return lines + [f"{p} [Fail] eager Error: {error['message']}"]
    lines.append(f"{p} [Datatype][eager]: {eager_types}")
    if status == scores.COMPILE_FAIL:
        return lines + [f"{p} [Fail] compiled Error: {error['message']}"]
    lines.append(f"{p} [Datatype][compiled]: {compiled_types}")
    if status == scores.RUNTIME_FAIL:
        # GraphNet reads a run failure as: both sides ran, shapes and types matched, and
        # an error line follows
        lines.append(f"{p} [DataType] eager:[] compiled:[] match:True")
        lines.append(f"{p} [Shape] eager:[] compiled:[] match:True")
        return lines + [f"{p} [Fail] compiled Error: {error['message']}"]
    type_match = gn["dtypes_eager"] == gn["dtypes_compiled"]
    shape_match = gn["shapes_eager"] == gn["shapes_compiled"]
    lines.append(
        f"{p} [DataType] eager:{gn['dtypes_eager']} compiled:{gn['dtypes_compiled']} "
        f"match:{type_match}"
    )
    lines.append(
        f"{p} [Shape] eager:{gn['shapes_eager']} compiled:{gn['shapes_compiled']} "
        f"match:{shape_match}"
    )
    for key, values in gn["correctness"].items():
        lines.append(f"{p} [Correctness]{key}: {' '.join(str(v) for v in values)}")
    if result["eager_ms"] is not None:
        # GraphNet's statistics, its speedup the ratio of the medians
        eager = {"e2e": result.get("eager_stats") or {"median": result["eager_ms"]}}
        compiled = {"e2e": result.get("compiled_stats") or {"median": result["compiled_ms"]}}
        lines.append(f"{p} [Performance][eager]: {json.dumps(eager)}")
        lines.append(f"{p} [Performance][compiled]: {json.dumps(compiled)}")
    if result["speedup"]:
        lines.append(f"{p} [Speedup][e2e]: {result['speedup']:.5f}")
    return lines


def write_graphnet_logs(directory: str, results, config: Dict[str, Any]) -> List[str]:
    """One ``<backend>.log`` per backend (GraphNet's plotting scripts draw one curve per
    log file of a folder); returns the paths written."""
    os.makedirs(directory, exist_ok=True)
    written = []
    for backend in config["backends"]:
        path = os.path.join(directory, f"{backend}.log")
        with open(path, "w", encoding="utf-8") as f:
            for r in results:
                if r["backend"] == backend:
                    f.write("\n".join(graphnet_log_lines(r, config)) + "\n")
        written.append(path)
    return written


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def format_table(summary: Dict[str, Any], tolerances: Sequence[int]) -> str:
    """The summary as a text table: counts and speedup, then S(t) and ES(t) per level.
    ``scaled`` counts the samples whose timed calls or limit followed their own cost."""
    rows = [
        f"{'backend':<10} {'samples':>7} {'ok':>4} {'slower':>6} {'fallback':>8} {'scaled':>6} "
        f"{'geomean':>8}  errors",
    ]
    for backend, s in summary.items():
        errors = ", ".join(f"{k} {v}" for k, v in s["errors"].items()) or "-"
        rows.append(
            f"{backend:<10} {s['samples']:>7} {s['ok']:>4} {s['slowdowns']:>6} "
            f"{s['fallbacks']:>8} {s.get('scaled', 0):>6} {_fmt(s['geomean_speedup']):>8}  "
            f"{errors}"
        )
    rows.append("")
    head = f"{'t':<14}" + "".join(f"{t:>6}" for t in tolerances)
    rows.append(head)
    for backend, s in summary.items():
        for key in ("S", "ES"):
            rows.append(
                f"{key + '(t) ' + backend:<14}"
                + "".join(f"{_fmt(s[key][str(t)]):>6}" for t in tolerances)
            )
    return "\n".join(rows)
