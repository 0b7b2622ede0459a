"""The peers' comparison from its results file: medians, the markdown tables and the chart.

Pure functions over the JSON ``run.py`` writes (``summarise``, ``render``, ``splice``), so
the table can be rendered again from a results file without running anything, and tested;
``chart`` draws the PNG (matplotlib is imported there only). The figures:

- **per tool turn**: wall time less the fake server's CPU over the same span, divided by the
  model calls (the harness's definition), and the client process's own CPU per model call; the
  ratio is the first of the two against the raw aiohttp loop's;
- **runs/s**: conversations (K tool turns and the answer) completed per second of wall time at
  N = 1 (one after another), N = ``mid`` and N = ``many`` at once;
- **memory per in-flight run**: the worker's peak resident set during the N = ``many`` batch
  less its resident set before it, divided by ``many`` (KiB);
- **first-line import**: the fastest of several fresh interpreters running the framework's
  import line, less the fastest bare interpreter, bytecode cached (wall ms);
- **CLI to first output**: the fastest of several starts of the framework's console script
  until its first byte on stdout (wall ms), or "no CLI".

Medians are taken over rounds; the import and CLI figures are minima over repeats.
"""

from __future__ import annotations

import statistics
from typing import Any

BEGIN = "<!-- peers:begin (bench/peers/run.py writes this part) -->"
END = "<!-- peers:end -->"
BASE = "raw aiohttp"


def wire_differences(wire: dict[str, Any]) -> dict[str, str]:
    """Per framework, how its conversation differs from the raw loop's (``wire.py``); {} if none."""
    found: dict[str, str] = {}
    for framework, modes in wire.items():
        for mode, seen in modes.items():
            expected = {**wire[BASE][mode], "stream": [mode == "sse"]}
            if seen != expected:
                found[framework] = f"{mode}: sent {seen}, expected {expected}"
                break
    return found


def _per_turn(cell: dict[str, Any]) -> tuple[float, float]:
    """(wall less server CPU, client CPU) ms per model call of one sample."""
    turns = cell["turns"]
    return (cell["wall_s"] - cell["server_cpu_s"]) / turns * 1e3, cell["cpu_s"] / turns * 1e3


def _figures(cells: list[dict[str, Any]]) -> dict[str, float]:
    """Medians over rounds of one (framework, mode, N) cell."""
    pairs = [_per_turn(c) for c in cells]
    found = {
        "overhead_ms": statistics.median(p[0] for p in pairs),
        "cpu_ms": statistics.median(p[1] for p in pairs),
        "runs_per_s": statistics.median(c["runs"] / c["wall_s"] for c in cells),
        "concurrency": cells[0]["concurrency"],
    }
    memory = [
        (c["rss_peak_kib"] - c["rss_before_kib"]) / c["runs"] for c in cells if "rss_peak_kib" in c
    ]
    if memory:
        found["kib_per_run"] = statistics.median(memory)
    return found


def summarise(results: dict[str, Any]) -> dict[str, Any]:
    """Per framework: per mode and N the median figures, plus import and CLI times."""
    summary: dict[str, Any] = {}
    for framework in results["frameworks"]:
        entry: dict[str, Any] = {"modes": {}, "errors": [], "failed": []}
        for mode in ("json", "sse"):
            rows = [
                s for s in results["samples"] if (s["framework"], s["mode"]) == (framework, mode)
            ]
            errors = list(dict.fromkeys(f"{mode}: {s['error']}" for s in rows if "error" in s))
            entry["failed"] += [mode] * bool(errors)
            good = [
                {n: c for n, c in s["samples"].items() if "error" not in c}
                for s in rows
                if "samples" in s
            ]
            cells = [(n, c) for s in rows for n, c in s.get("samples", {}).items() if "error" in c]
            meta = results.get("meta", {})
            label = {
                "n1": "N = 1",
                "mid": f"N = {meta.get('mid')}",
                "many": f"N = {meta.get('many')}",
            }
            errors += list(dict.fromkeys(f"{mode}, {label[n]}: {c['error']}" for n, c in cells))
            entry["errors"] += [e for e in errors if e not in entry["errors"]]
            entry["failed"] += [f"{mode}:{n}" for n, _ in cells]
            entry["modes"][mode] = {
                n: _figures([g[n] for g in good if n in g])
                for n in ("n1", "mid", "many")
                if any(n in g for g in good)
            }
        entry["import_ms"] = _net_min(results.get("imports", {}), framework)
        entry["cli"] = _cli(results.get("clis", {}), framework)
        summary[framework] = entry
    return summary


def _net_min(imports: dict[str, Any], framework: str) -> float | None:
    """Fastest import line less the fastest bare interpreter, wall ms."""
    if framework not in imports or "bare" not in imports:
        return None
    return min(imports[framework]["wall_ms"]) - min(imports["bare"]["wall_ms"])


def _cli(clis: dict[str, Any], framework: str) -> dict[str, Any]:
    """``{"ms": fastest, "command": ...}``, or ``{"none": why}``."""
    found = clis.get(framework)
    if found is None:
        return {"none": "not measured"}
    if "ms" not in found:
        return {"none": found.get("none", "no CLI")}
    return {"ms": min(found["ms"]), "command": found["command"]}


def _ratio(value: float | None, base: float | None) -> str:
    return f" ({value / base:.1f}x)" if value is not None and base else ""


def _missing(entry: dict[str, Any], mode: str, n: str) -> str:
    """Why a cell is empty: the framework failed there (in that mode), or it was not asked for."""
    failed = mode in entry["failed"] or f"{mode}:{n}" in entry["failed"]
    return "failed" if failed else "not measured"


def _turn_cell(entry: dict[str, Any], base: dict[str, Any], mode: str, n: str) -> str:
    cell = entry["modes"].get(mode, {}).get(n)
    if cell is None:
        return _missing(entry, mode, n)
    ref = base["modes"].get(mode, {}).get(n, {}).get("overhead_ms")
    return f"{cell['overhead_ms']:.2f} / {cell['cpu_ms']:.2f}{_ratio(cell['overhead_ms'], ref)}"


def _rate_cell(entry: dict[str, Any], base: dict[str, Any], mode: str, n: str) -> str:
    cell = entry["modes"].get(mode, {}).get(n)
    if cell is None:
        return _missing(entry, mode, n)
    ref = base["modes"].get(mode, {}).get(n, {}).get("runs_per_s")
    share = f" ({cell['runs_per_s'] / ref:.0%})" if ref and n == "many" else ""
    return f"{cell['runs_per_s']:.{0 if cell['runs_per_s'] >= 10 else 1}f}{share}"


def _n(summary: dict[str, Any], mode: str, n: str) -> str:
    for entry in summary.values():
        cell = entry["modes"].get(mode, {}).get(n)
        if cell is not None:
            return str(cell["concurrency"])
    return "?"


def render(results: dict[str, Any]) -> str:
    """The two markdown tables (and the footnotes naming what a framework could not do)."""
    summary = summarise(results)
    base = summary.get(BASE, {"modes": {}})
    n_mid, n_many = _n(summary, "json", "mid"), _n(summary, "json", "many")
    lines = [
        "Per model call, ms: wall less the fake server's CPU / client CPU (the first against "
        f"{BASE}'s).",
        "",
        f"| framework | JSON, N = 1 | JSON, N = {n_mid} | SSE, N = 1 | SSE, N = {n_mid} |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, entry in summary.items():
        cells = [_turn_cell(entry, base, m, n) for m in ("json", "sse") for n in ("n1", "mid")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    sse_many = any("many" in e["modes"].get("sse", {}) for e in summary.values())
    head = f"| framework | runs/s, N = 1 | N = {n_mid} | N = {n_many} (of {BASE}'s) |"
    head += f" SSE, N = {n_many} |" * sse_many
    head += (
        f" KiB per in-flight run (N = {n_many}) | first-line import, ms | CLI to first output, ms |"
    )
    lines += [
        "",
        "Conversations (K tool turns and the answer) per second, JSON; memory and start-up.",
        "",
    ]
    lines += [head, "|---|" + "---:|" * (6 + sse_many)]
    for name, entry in summary.items():
        cells = [_rate_cell(entry, base, "json", n) for n in ("n1", "mid", "many")]
        if sse_many:
            cells.append(_rate_cell(entry, base, "sse", "many"))
        kib = entry["modes"].get("json", {}).get("many", {}).get("kib_per_run")
        cells.append(_missing(entry, "json", "many") if kib is None else f"{kib:.0f}")
        imp = entry["import_ms"]
        cells.append("not measured" if imp is None else f"{imp:.0f}")
        cli = entry["cli"]
        cells.append(f"{cli['ms']:.0f} (`{cli['command']}`)" if "ms" in cli else cli["none"])
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    errors = [f"- {name}: {e}" for name, entry in summary.items() for e in entry["errors"]]
    if errors:
        lines += ["", "What failed (the run's JSON has the rest):", "", *errors]
    return "\n".join(lines) + "\n"


def render_meta(results: dict[str, Any]) -> str:
    """One paragraph: when, where, under what load, which versions."""
    meta = results["meta"]
    load = meta["load"]
    versions = ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
    during = load.get("during") or [load["before"][0]]
    changes = " (with local changes)" * meta["dirty"]
    return (
        f"Measured {meta['date']} on commit `{meta['commit']}`{changes}: {meta['nproc']} CPUs "
        f"({meta['cpu']}), Python {meta['python']}; load average {load['before'][0]:.1f} before, "
        f"{min(during):.1f}-{max(during):.1f} during, {load['after'][0]:.1f} after; "
        f"K = {meta['turns']} tool turns and the answer a conversation; {meta['rounds']} "
        f"interleaved rounds (median), N = {meta['many']} in {meta['many_rounds']} of them; "
        f"{'QUICK run, not for quoting; ' * meta['quick']}versions: {versions}.{_wire(results)}\n"
    )


def _wire(results: dict[str, Any]) -> str:
    """A sentence on the wire check, when the results have one."""
    if "wire" not in results:
        return ""
    differ = wire_differences(results["wire"])
    if not differ:
        return (
            " Every driver sent the same requests (`wire.py`: the same count, stream flag, tool "
            "and roles in both modes)."
        )
    return f" Not timed, their requests differ from the raw loop's: {', '.join(differ)}."


def block(results: dict[str, Any], chart: str) -> str:
    """What goes between the markers: the machine and versions, the tables, the chart."""
    image = f"![agentloop and its peers: per-turn cost, runs/s, memory, start-up]({chart})"
    return render_meta(results) + "\n" + render(results) + "\n" + image + "\n"


def splice(text: str, block: str) -> str:
    """``text`` with the part between the peers' markers replaced by ``block``."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + block + text[end:]


def chart(results: dict[str, Any], path: str) -> None:
    """Four panels of horizontal bars (log scales where the spread needs them) into ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summarise(results)
    names = list(summary)
    fig, axes = plt.subplots(2, 2, figsize=(12, 7.5))
    panels = [
        (
            "ms per model call (wall less server CPU), N = 1",
            [("json", "n1", "overhead_ms", "JSON"), ("sse", "n1", "overhead_ms", "SSE")],
            True,
        ),
        (
            "runs/s (JSON)",
            [
                ("json", n, "runs_per_s", f"N = {_n(summary, 'json', n) if n != 'n1' else 1}")
                for n in ("n1", "mid", "many")
            ],
            True,
        ),
        (
            f"KiB per in-flight run (JSON, N = {_n(summary, 'json', 'many')})",
            [("json", "many", "kib_per_run", "KiB")],
            False,
        ),
    ]
    for ax, (title, series, log) in zip(axes.flat, panels, strict=False):
        _bars(
            ax,
            names,
            [
                (label, [summary[f]["modes"].get(m, {}).get(n, {}).get(key) for f in names])
                for m, n, key, label in series
            ],
            title,
            log,
        )
    start = [
        ("first-line import", [summary[f]["import_ms"] for f in names]),
        ("CLI to first output", [summary[f]["cli"].get("ms") for f in names]),
    ]
    _bars(axes.flat[3], names, start, "start-up, ms (no bar: not measured / no CLI)", False)
    meta = results["meta"]
    fig.suptitle(f"agentloop and its peers, K = {meta['turns']} tool turns ({meta['date']})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _label(value: float) -> str:
    return f" {value:,.0f}" if value >= 100 else f" {value:.3g}"


def _bars(
    ax: Any, names: list[str], series: list[tuple[str, list[float | None]]], title: str, log: bool
) -> None:
    """Grouped horizontal bars, one group per framework; a missing value draws nothing."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    height = 0.8 / len(series)
    top = max((v for _, values in series for v in values if v), default=1.0)
    for i, (label, values) in enumerate(series):
        ys = [j + i * height for j in range(len(names))]
        ax.barh(ys, [v or 0 for v in values], height=height, label=label)
        for y, v in zip(ys, values, strict=True):
            if v:
                ax.text(v, y, _label(v), va="center", fontsize=7)
    ax.set_yticks([j + height * (len(series) - 1) / 2 for j in range(len(names))], names)
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlim(right=top * 3)
    else:
        ax.set_xlim(right=top * 1.2)
    ax.set_title(title, fontsize=10)
    if len(series) > 1:
        ax.legend(fontsize=8, loc="best")
