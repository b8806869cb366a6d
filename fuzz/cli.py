"""``ckpt-fuzz``: the harness for people; pytest stays the engine of every campaign, replay and registry check.

Exit codes: ``run``, ``replay`` and ``known-issues`` exit as pytest does (0 nothing failed, 1 something failed, 2
interrupted, 4 a bad option); ``check`` as a repro.py (0 a match, 1 a failure, 2 could not run); ``report`` 0, or 2
when the run is not there (``report --merge`` 0 when the merged campaign passed, 1 when it found something, 2 when the
runs cannot be merged or a job did not complete); ``bisect`` 0 once its table is printed, 2 when the repro ran on no
version. ``--thunder VERSION`` (run, check, replay, known-issues) runs the command on that thunder (a version,
``nightly``, ``release`` or ``pinned``), installed into its own cached folder over the venv's torch.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import NoReturn

from fuzz.campaign.choices import CONVERTER_CHOICES, DEFAULT_SHARDS, DEVICE_CHOICES
from fuzz.judge.limits import DEFAULT_TIMEOUT_S
from fuzz.report.run_folder import SUMMARY, find_run

DEFAULT_ROOT = Path("fuzz-artifacts")
_ROOT = str(Path(__file__).resolve().parent.parent)
_REGISTRY = Path(_ROOT) / "known_issues"  # (fuzz.registry.issue.KNOWN_ISSUES_DIR, no torch)
COULD_NOT_RUN = 2
THUNDER_VARIABLE = "CKPT_FUZZ_THUNDER"  # "REQUEST=VERSION" once the process runs on the thunder --thunder asked for


def _pytest(arguments: list[str], command: list[str]) -> NoReturn:
    """Become the campaign engine (pytest on this package's tests) with ``arguments``: exec, not a child process, so
    Ctrl-C and SIGTERM reach pytest itself (it writes the summary of what was found) and its exit status is ours."""
    from fuzz.report.summary import COMMAND_VARIABLE

    env = {**os.environ, COMMAND_VARIABLE: shlex.join(["ckpt-fuzz", *command])}
    # --disable-warnings: the summary counts them; --rootdir: node ids (Hypothesis's keys of a model-zoo architecture's
    # test) the same wherever the command runs.
    engine = [sys.executable, "-m", "pytest", "--pyargs", "fuzz", "-q", "--disable-warnings", "--rootdir", _ROOT]
    sys.stdout.flush()
    os.execve(sys.executable, [*engine, *arguments], env)


def _run(args: argparse.Namespace, extra: list[str]) -> int:
    arguments = ["--hypothesis-profile", args.profile, "--fuzz-device", args.device, "--converter", args.converter]
    arguments += ["--fuzz-artifacts", str(args.artifacts)]
    arguments += ["-n", args.jobs] if args.jobs != "0" else []
    arguments += ["--fuzz-minutes", str(args.minutes), "--fuzz-shards", str(args.shards)]
    if (index := _job_index(args.job_index)) is not None:
        from fuzz.report.merge import campaign_seed, job_seed

        if clashing := [option for option in extra if option.split("=")[0] in _SET_BY_JOB]:
            print(
                f"ckpt-fuzz run: {', '.join(clashing)} would undo the job's own (use --shards and --seed)",
                file=sys.stderr,
            )
            return 4
        base = args.seed if args.seed is not None else campaign_seed(args.campaign)
        arguments += ["--fuzz-seed", str(job_seed(base, index, args.shards))]
        arguments += ["--fuzz-run-id", f"{args.campaign}-job{index}"]
    elif args.seed is not None:
        arguments += ["--fuzz-seed", str(args.seed)]
    return _pytest([*arguments, *extra], args.argv)


# What `run` sets for one job of a fleet; the same pytest options among the extra ones would silently win.
_SET_BY_JOB = ("--fuzz-seed", "--fuzz-shards", "--fuzz-run-id")
# Where schedulers put the index of one job of an array: Slurm job arrays, Kubernetes indexed Jobs.
JOB_INDEX_VARIABLES = ("SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX")


def _job_index(given: int | None) -> int | None:
    """This job's index in its campaign: ``--job-index``, else the scheduler's variable, else None (not a fleet)."""
    found = [os.environ[name] for name in JOB_INDEX_VARIABLES if os.environ.get(name, "").isdigit()]
    return given if given is not None else int(found[0]) if found else None


def _replay(args: argparse.Namespace, extra: list[str]) -> int:
    """Replay what a run's database holds, with the generator options of that run (they decide what entries mean)."""
    summary = json.loads((find_run(args.artifacts, args.run) / SUMMARY).read_text())
    # (RUN is an option: a positional would take the value of a pytest option passed through, e.g. -k's.)
    if (options := summary.get("replay_options")) is None:
        raise FileNotFoundError(f"run {summary.get('run_id')} records no options to replay with (an older run)")
    arguments = ["--hypothesis-profile", "replay", "--fuzz-artifacts", str(args.artifacts)]
    arguments += [item for name, value in options.items() if value is not None for item in (f"--{name}", str(value))]
    return _pytest([*arguments, *extra], args.argv)


def _check(args: argparse.Namespace, extra: list[str]) -> int:
    """One spec, eager vs thunderfx: the verdict on one line, and the exit code of a repro.py."""
    from fuzz.generate.spec import NetSpec, SpecError

    path = args.spec / "spec.json" if args.spec.is_dir() else args.spec
    try:
        spec = NetSpec.from_json(path.read_text())
    except (OSError, SpecError) as error:
        print(f"ckpt-fuzz check: cannot read a spec from {path}: {error}", file=sys.stderr)
        return COULD_NOT_RUN
    from dataclasses import replace

    from fuzz.campaign.config import resolve_device
    from fuzz.judge.verdict import check_spec
    from fuzz.run.runner import executor_names, use_executors

    try:
        device = resolve_device(args.device)
        use_executors(executor_names("auto", device))  # as a campaign on this device runs it
        outcome = check_spec(replace(spec, device=device), converter=args.converter, timeout_s=args.timeout)
    except Exception as error:  # eager itself failed, or no such device: no verdict on thunder
        print(
            f"COULD NOT RUN: {type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
        )
        return COULD_NOT_RUN
    if not outcome.valid:
        print(f"COULD NOT JUDGE: {outcome.invalid_reason}")
        return COULD_NOT_RUN
    if outcome.failure is None:
        print(f"PASS: thunderfx matches in {outcome.seconds:.1f} s ({outcome.error_words()})")
        return 0
    print(f"FAIL: {outcome.failure.failure_class} [{outcome.failure.triage}] {str(outcome.failure).splitlines()[0]}")
    return 1


def _report(args: argparse.Namespace, extra: list[str]) -> int:
    from fuzz.report.html import write_report

    if not args.merge:
        run_dir = find_run(args.artifacts, args.run)
        if args.against:
            from fuzz.report.clusters import compare_runs

            print("\n".join(compare_runs(run_dir, args.artifacts, args.against)))
        print(write_report(run_dir))
        return 0
    from fuzz.report.merge import merge_named_runs

    if args.run:
        print("ckpt-fuzz report: give the runs to merge after --merge, not before it", file=sys.stderr)
        return COULD_NOT_RUN
    try:
        merged = merge_named_runs(args.artifacts, args.merge, args.into)
    except (FileNotFoundError, ValueError) as error:
        print(f"ckpt-fuzz report --merge: {error}", file=sys.stderr)
        return COULD_NOT_RUN
    print(f"{len(args.merge)} runs, {merged['examples']} examples, {len(merged['failures'])} distinct failure(s)")
    print(f"result: {merged['result']}")
    print(write_report(args.artifacts / merged["run_id"]))
    result = merged["result"]
    return 0 if result.startswith("passed") else 1 if result.startswith("failed") else COULD_NOT_RUN


def _known_issues(args: argparse.Namespace, extra: list[str]) -> int:
    """Re-test every registry entry's spec on the installed thunder (the engine's ``--known-issues check``); with
    ``--record``, record the signatures and bands of the entries named (all but the slow ones when none is)."""
    if args.record is not None:
        return _record_signatures(args.record, args.device, args.add or [])
    if args.add:
        print("ckpt-fuzz known-issues: --add goes with --record ID (the entry the failures reproduce)", file=sys.stderr)
        return 4
    arguments = ["-k", "known_issue_still_reproduces", "--known-issues", "check"]
    arguments += ["--fuzz-timeout", str(args.timeout), "--fuzz-device", args.device]
    arguments += ["--fuzz-artifacts", str(args.artifacts), "--fuzz-progress", "0"]
    return _pytest([*arguments, *extra], args.argv)


def _record_signatures(ids: list[str], device: str, added: list[str]) -> int:
    """``known-issues --record [--add]``: the options checked before thunder loads, then
    `fuzz.registry.files.record_entries`."""
    if added and len(ids) != 1:
        print("ckpt-fuzz known-issues: --add needs exactly one entry: --record ID --add FOLDER ...", file=sys.stderr)
        return 4
    if missing := [folder for folder in added if not (Path(folder) / "spec.json").is_file()]:
        print(f"ckpt-fuzz known-issues --add: no spec.json in {', '.join(missing)}", file=sys.stderr)
        return 4
    if unknown := [i for i in ids if not (_REGISTRY / i / "spec.json").is_file()]:  # checked before thunder loads
        print(f"ckpt-fuzz known-issues --record: no known issue {', '.join(unknown)} in {_REGISTRY}", file=sys.stderr)
        return 4
    from fuzz.campaign.config import resolve_device
    from fuzz.registry.files import record_entries

    return record_entries(ids, resolve_device(device), [Path(folder) for folder in added])


def _bisect(args: argparse.Namespace, extra: list[str]) -> int:
    """A failure's repro.py over the thunder versions in range: the table, and where the result changes."""
    from datetime import date

    from packaging.version import Version

    from fuzz.registry.files import write_repro  # a registry entry's repro.py is generated, not committed
    from fuzz.registry.issue import KNOWN_ISSUES_DIR, VERSIONS_FILE
    from fuzz.versions.bisect import ERROR, bisect, found_on, run_repro, table, version_record
    from fuzz.versions.thunder_versions import VersionError, available, is_nightly, resolve

    folder = (Path(args.target) if Path(args.target).is_dir() else KNOWN_ISSUES_DIR / args.target).resolve()
    entry = folder.parent == KNOWN_ISSUES_DIR and (folder / "spec.json").exists()
    repro = write_repro(folder.name) if entry else folder / "repro.py"
    if not repro.exists():
        raise FileNotFoundError(f"{args.target} is neither a failure folder holding repro.py nor a known-issue id")
    if args.record and folder.parent != KNOWN_ISSUES_DIR:
        raise FileNotFoundError(f"--record writes a known issue's {VERSIONS_FILE}: {args.target} is not one")
    versions = available()
    if args.versions:
        candidates = sorted({resolve(v.strip(), versions) for v in args.versions.split(",")}, key=Version)
    else:
        oldest, newest = Version(resolve(args.oldest, versions)), Version(resolve(args.newest, versions))
        candidates = [
            v for v in versions if oldest <= Version(v) <= newest and (is_nightly(v) or not Version(v).is_prerelease)
        ]
    if not candidates:
        raise VersionError(f"no release or nightly between --from {args.oldest} and --to {args.newest}")
    anchors = [candidates[0], found_on(repro) or candidates[-1], candidates[-1]]
    print(
        f"bisecting {repro} over {len(candidates)} thunder versions ({candidates[0]} .. {candidates[-1]})", flush=True
    )

    def run(version: str):
        trial = run_repro(repro, version, args.timeout)
        print(f"  {version}: {trial.result} in {trial.seconds:.1f} s", flush=True)
        return trial

    trials, boundaries = bisect(candidates, anchors, run)
    print("\n".join(table(trials)))
    results = {t.result for t in trials if t.result != ERROR}
    if not results:
        print("the repro could not run on any version tried")
        return COULD_NOT_RUN
    print("\n".join(b.describe() for b in boundaries) or f"no change: {results.pop()} on every version that ran")
    if args.record:
        path = folder / VERSIONS_FILE
        earlier = json.loads(path.read_text())["checked"] if path.exists() else {}
        try:  # merged with what was checked before: a bisection over a few versions refines the record
            record = version_record({**earlier, **{t.version: t.result for t in trials}})
        except ValueError as error:
            print(f"not recorded: {error}")
            return COULD_NOT_RUN
        record["checked_on"] = date.today().isoformat()
        path.write_text(json.dumps(record, indent=2) + "\n")
        print(f"recorded in {path}")
    return 0


def _jobs(value: str) -> str:
    if value == "auto" or (value.isdigit() and value == str(int(value))):
        return value
    raise argparse.ArgumentTypeError(f"{value!r} is neither a number of workers nor auto")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ckpt-fuzz",
        description="Fuzz eager vs thunderfx gradient parity of activation-checkpointed networks. Arguments after "
        "the ones listed for a command go to the pytest engine unchanged (e.g. --fuzz-layers, --fuzz-seed).",
        epilog=__doc__.split("\n\n", 1)[1],
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, handler, help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        sub.set_defaults(handler=handler)
        return sub

    def artifacts(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--artifacts", type=Path, default=DEFAULT_ROOT, help="root of the run folders (%(default)s)")

    def device(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--device", default="auto", choices=DEVICE_CHOICES, help="(default: %(default)s)")

    def thunder(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--thunder",
            help="run on this lightning-thunder: a version, nightly, release or pinned (default: the venv's)",
        )

    run = command("run", _run, "a campaign: writes ARTIFACTS/<run-id>/ (summary.json, report.html, failures)")
    run.add_argument("--minutes", type=float, default=5.0, help="budget for new examples (%(default)s)")
    run.add_argument(
        "-n",
        "--jobs",
        type=_jobs,
        default="2",
        help="xdist worker processes; 0: one process; auto: on CUDA --fuzz-workers-per-gpu per GPU, on CPU one per "
        "core (%(default)s)",
    )
    run.add_argument("--shards", type=int, default=DEFAULT_SHARDS, help="test items per family, over -n (%(default)s)")
    run.add_argument(
        "--seed",
        type=int,
        help="generation seed (default: a fresh one); of one job of a fleet: the campaign's base seed (default: one "
        "derived from --campaign, so each campaign draws its own networks)",
    )
    run.add_argument(
        "--job-index",
        type=int,
        help="this job's index in a campaign run as N jobs (default: $SLURM_ARRAY_TASK_ID or $JOB_COMPLETION_INDEX): "
        "its seed is SEED + index x shards and its run id CAMPAIGN-job<index>",
    )
    run.add_argument(
        "--campaign", default="fleet", help="the fleet campaign's name, in each job's run id (%(default)s)"
    )
    run.add_argument("--profile", default="nightly", help="Hypothesis profile: ci, dev, nightly, replay (%(default)s)")
    run.add_argument("--converter", default="fixed", choices=CONVERTER_CHOICES, help="(default: %(default)s)")
    artifacts(run)
    device(run)
    thunder(run)

    check = command("check", _check, "one spec: eager vs thunderfx; exit 0 match, 1 failure, 2 could not run")
    check.add_argument("spec", type=Path, help="a spec.json, or a failure folder holding one")
    check.add_argument("--converter", default="fixed", choices=CONVERTER_CHOICES, help="(default: %(default)s)")
    check.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="thunderfx's limit, s (%(default)s)")
    check.add_argument("--device", default="auto", choices=DEVICE_CHOICES, help="run it there (default: %(default)s)")
    thunder(check)

    replay = command("replay", _replay, "re-run what a run's example database holds, with that run's options")
    replay.add_argument("--run", help="a run id under ARTIFACTS or a run folder (default: the latest)")
    artifacts(replay)
    thunder(replay)

    report = command("report", _report, "render a run's report.html again; prints its path")
    report.add_argument("run", nargs="?", help="a run id under ARTIFACTS or a run folder (default: the latest)")
    report.add_argument(
        "--merge",
        nargs="+",
        metavar="RUN",
        help="merge these runs (the jobs of one campaign) into a new run folder ARTIFACTS/INTO with one report",
    )
    report.add_argument("--into", help="the merged run's id (default: a fresh one)")
    report.add_argument("--against", metavar="RUN", help="clusters new, gone, changed since RUN (or previous)")
    artifacts(report)

    known = command("known-issues", _known_issues, "re-test every known-issue entry on the installed thunder")
    known.add_argument("--timeout", type=float, default=30.0, help="seconds per entry under thunderfx (%(default)s)")
    known.add_argument(
        "--record",
        nargs="*",
        metavar="ID",
        help="record these entries' signatures and bands (entry.toml) from their own reproductions (none named: all "
        "but the slow ones)",
    )
    known.add_argument(
        "--add",
        nargs="+",
        action="extend",  # --add A --add B admits both
        metavar="FAILURE_FOLDER",
        help="with --record ID: admit these shrunk failures as reproductions of ID first (each must match its "
        "predicate, fail in its class and pass without its trigger)",
    )
    artifacts(known)
    device(known)
    thunder(known)

    bisect = command("bisect", _bisect, "run a repro.py over thunder versions; prints where its result changes")
    bisect.add_argument("target", help="a failure folder holding repro.py, or a known-issue id")
    bisect.add_argument("--from", dest="oldest", default="0.2.5", help="oldest version to try (%(default)s)")
    bisect.add_argument("--to", dest="newest", default="nightly", help="newest version to try (%(default)s)")
    bisect.add_argument("--versions", help="exactly these versions, comma-separated (instead of --from/--to)")
    bisect.add_argument("--timeout", type=float, default=900.0, help="seconds per version (%(default)s)")
    bisect.add_argument("--record", action="store_true", help="write the result to the known issue's versions.json")
    return parser


def _on_thunder(request: str, argv: list[str]) -> None:
    """Run this same command again in a fresh interpreter on the thunder ``request`` names (installed and probed
    first; `VersionError` before any example runs when it cannot be); returns when this process runs on it."""
    from fuzz.versions.thunder_versions import PACKAGE, VersionError, installed, prepare

    chosen, _, exact = os.environ.get(THUNDER_VARIABLE, "").partition("=")
    if chosen == request:  # the re-executed command: check it really imports what was prepared
        if (imported := installed()) != exact:
            raise VersionError(f"--thunder {request} prepared {PACKAGE} {exact}, but {imported} imports")
        return
    thunder = prepare(request)
    print(f"ckpt-fuzz: on lightning-thunder {thunder.version}" + (f" from {thunder.folder}" if thunder.folder else ""))
    env = thunder.environment({**os.environ, THUNDER_VARIABLE: f"{request}={thunder.version}"})
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", "fuzz.cli", *argv], env)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    argv = sys.argv[1:] if argv is None else argv
    args, extra = parser.parse_known_args(argv)
    args.argv = argv
    if extra and args.command in ("check", "report", "bisect"):
        parser.error(f"{args.command}: unrecognized arguments: {' '.join(extra)}")
    from fuzz.registry.triggers import EntryError
    from fuzz.versions.thunder_versions import VersionError

    try:
        if getattr(args, "thunder", None):
            _on_thunder(args.thunder, argv)
        return args.handler(args, extra)
    except (FileNotFoundError, VersionError, EntryError) as error:
        print(f"ckpt-fuzz {args.command}: {error}", file=sys.stderr)
        return COULD_NOT_RUN


if __name__ == "__main__":
    sys.exit(main())
