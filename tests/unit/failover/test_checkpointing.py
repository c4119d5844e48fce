"""Checkpointing options (Flink's keys) and the Checkpoint declaration, and the render-time rules of checkpointed
chains: each bad value or declaration is one error naming the offender and the fix.

    src#0 ==BLOCKING==> sessions#0 -PIPELINED-> report#0      (sessions -> report chained)
"""

from __future__ import annotations

import re

import pytest

from airflow_region_failover.checkpoint.declared import chain_checkpoint
from airflow_region_failover.exceptions import GraphError, OptionError
from airflow_region_failover.failover.checkpointing import (
    Checkpoint,
    CheckpointConfig,
    EpochCut,
    parse_checkpointing,
    schema_columns,
)
from airflow_region_failover.failover.options import parse_options
from airflow_region_failover.graph.builder import JobGraphBuilder
from airflow_region_failover.job import StepImpl

DECL = Checkpoint(state_key=["user"], state_schema="user string, start long, tags array<string>", epochs=4)


def fn(spark: object, inputs: object, state: object, context: object) -> None:
    return None


def test_defaults_and_flink_keys() -> None:
    assert parse_checkpointing({}) == CheckpointConfig(0, 1, True, 8, 200, None)
    config = parse_checkpointing({"execution.checkpointing.interval": "30 s", "state.checkpoints.num-retained": "3",
                                  "state.backend.incremental": "false", "execution.state-recovery.path": "latest"})
    assert config == CheckpointConfig(30_000, 3, False, 8, 200, "latest")
    newer = parse_checkpointing({"state.checkpoints.num-retained": "3", "execution.checkpointing.num-retained": "2",
                                 "execution.checkpointing.incremental": "FALSE"})
    assert (newer.num_retained, newer.incremental) == (2, False)  # Flink 2's keys win over the deprecated ones
    assert parse_options({"state.checkpoints.num-retained": "4"}).checkpointing.num_retained == 4
    assert parse_options(parse_options({"state.checkpoints.num-retained": "4"}).to_options()) == \
        parse_options({"state.checkpoints.num-retained": "4"})


@pytest.mark.parametrize(("options", "message"), [
    ({"state.checkpoints.num-retained": "0"}, "state.checkpoints.num-retained: '0' is not valid; use a whole "),
    ({"state.backend.incremental": "yes"}, "state.backend.incremental: 'yes' is not valid; use true or false"),
    ({"execution.checkpointing.interval": "soon"}, "execution.checkpointing.interval"),
    ({"state.checkpoints.max-sorted-runs": "1"}, "state.checkpoints.max-sorted-runs: '1' is not valid"),
    ({"state.checkpoints.max-size-amplification": "0"}, "state.checkpoints.max-size-amplification"),
    ({"execution.state-recovery.path": "a run"}, "execution.state-recovery.path"),
    ({"state.checkpoints.num-retaned": "2"}, "did you mean 'state.checkpoints.num-retained'"),
])
def test_bad_options_name_the_key(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace("'", "'")):
        parse_options(options)


def test_schema_columns_of_a_ddl_string() -> None:
    assert schema_columns("user string, start long, tags array<string>, m map<string,int>", "x") == \
        ("user", "start", "tags", "m")
    with pytest.raises(GraphError, match="needs a name and a type"):
        schema_columns("user", "x")


@pytest.mark.parametrize(("decl", "message"), [
    (Checkpoint(state_key=[], state_schema="a long"), "state_key=\\[\\]\\) needs one or more column names"),
    (Checkpoint(state_key=["b"], state_schema="a long"), "state_key column 'b' is not in state_schema"),
    (Checkpoint(state_key=["a"], state_schema="a long", epochs=0), "epochs=0\\) must be a whole number"),
    (Checkpoint(state_key=["a"], state_schema=""), "must be a Spark DDL string"),
])
def test_bad_declarations_name_the_step(decl: Checkpoint, message: str) -> None:
    with pytest.raises(GraphError, match=f"step 's': Checkpoint.*{message}"):
        decl.check("s")


def test_a_bad_cut_is_refused_at_once() -> None:
    with pytest.raises(GraphError, match="cut='rows'"):
        Checkpoint(state_key=["a"], state_schema="a long", cut="rows")
    assert Checkpoint(state_key="a", state_schema="a long", cut="key-groups").cut is EpochCut.KEY_GROUPS


def test_epochs_auto_is_accepted_and_any_other_string_refused_at_once() -> None:
    auto = Checkpoint(state_key="a", state_schema="a long", epochs="AUTO", max_epochs=50)
    auto.check("s")
    assert auto.auto and not DECL.auto and auto.with_epochs(7).epochs == 7 and auto.with_epochs(7).max_epochs == 50
    assert auto.with_epochs(7).to_dict()["epochs"] == 7  # the epoch plan's fingerprint holds the number run
    assert auto.with_epochs(7).count == 7 == Checkpoint("a", "a long", epochs=7).count
    with pytest.raises(GraphError, match="has no number until its run's plan fixes one"):
        _ = auto.count
    for other in ("auto", "10", "Daly"):
        with pytest.raises(GraphError, match=f"Checkpoint\\(epochs='{other}'\\) is unknown; use a whole number"):
            Checkpoint(state_key="a", state_schema="a long", epochs=other)


@pytest.mark.parametrize(("decl", "message"), [
    (Checkpoint(state_key="a", state_schema="a long", epochs="AUTO", max_epochs=0), "max_epochs=0\\) must be"),
    (Checkpoint(state_key="a", state_schema="a long", epochs="AUTO", max_epochs=True), "max_epochs=True\\) must"),
    (Checkpoint(state_key="a", state_schema="a long", epochs=4, max_epochs=8), "bounds only epochs='AUTO'"),
])
def test_a_bad_max_epochs_names_the_step(decl: Checkpoint, message: str) -> None:
    with pytest.raises(GraphError, match=f"step 's': Checkpoint.*{message}"):
        decl.check("s")


def graph(keyed: bool = False, cluster: bool = False, second_input: bool = False) -> object:
    builder = JobGraphBuilder().step("src").step("sessions").step("report").step("sink")
    builder.edge("src", "sessions", exchange="BLOCKING", partition_by=["user"] if keyed else ())
    if second_input:
        builder.step("dim").edge("dim", "sessions", exchange="BLOCKING")
    builder.edge("sessions", "report", exchange="PIPELINED", distribution="POINTWISE")
    builder.edge("report", "sink", exchange="BLOCKING", cluster_by=["user"] if cluster else ())
    return builder.build()


def impls(**decls: Checkpoint | None) -> dict[str, StepImpl]:
    return {s: StepImpl(s, fn=fn, checkpoint=decls.get(s)) for s in ("src", "sessions", "report", "sink", "dim")}


def test_a_chain_is_checkpointed_by_any_member_and_cuts_its_heads_input() -> None:
    chain = chain_checkpoint(graph(), ["sessions", "report"], impls(report=DECL))
    assert chain is not None and chain.sliced.source == "src" and list(chain.stateful) == ["report"]
    assert chain_checkpoint(graph(), ["sessions", "report"], impls()) is None
    assert chain.key_groups(graph(), "report", 0) == range(0, 128) and not chain.rescalable("report")  # type: ignore[arg-type]
    auto = Checkpoint(["user"], DECL.state_schema, epochs="AUTO")
    both = chain_checkpoint(graph(), ["sessions", "report"], impls(sessions=auto, report=auto))
    assert both is not None and both.auto and not chain.auto
    run = both.with_epochs(3)  # every member runs the epochs its run's plan fixed
    assert not run.auto and {c.epochs for c in (run.declaration, *run.stateful.values())} == {3}
    keyed = chain_checkpoint(graph(keyed=True), ["sessions", "report"], impls(sessions=DECL))
    assert keyed is not None and keyed.rescalable("sessions") and keyed.key_columns("sessions") == ("user",)


@pytest.mark.parametrize(("kwargs", "decls", "message"), [
    ({}, {"sessions": DECL, "report": Checkpoint(["user"], DECL.state_schema, epochs=5)},
     "step 'report' is chained with 'sessions' but declares another epoch plan"),
    ({"second_input": True}, {"sessions": DECL}, "reads 2 inputs; say which one the epochs cut with sliced_input"),
    ({}, {"sessions": Checkpoint(["user"], DECL.state_schema, epochs="AUTO"),
          "report": Checkpoint(["user"], DECL.state_schema, epochs="AUTO", max_epochs=9)}, "another epoch plan"),
    ({}, {"sessions": Checkpoint(["user"], DECL.state_schema, sliced_input="nope")}, "sliced_input='nope'\\) names no"),
    ({}, {"sessions": Checkpoint(["user"], DECL.state_schema, cut="key-groups")}, "needs a keyed input"),
    ({"cluster": True}, {"report": DECL}, "result 'report->sink' of 'report' .* cannot be cluster_by"),
])
def test_chains_that_cannot_be_checkpointed_are_refused(kwargs: dict[str, bool], decls: dict[str, Checkpoint],
                                                         message: str) -> None:
    with pytest.raises(GraphError, match=message):
        chain_checkpoint(graph(**kwargs), ["sessions", "report"], impls(**decls))  # type: ignore[arg-type]


def test_the_sliced_input_must_be_blocking() -> None:
    g = (JobGraphBuilder().step("src").step("s").edge("src", "s", exchange="PIPELINED", distribution="POINTWISE")
         .build())
    with pytest.raises(GraphError, match="is PIPELINED; make it BLOCKING"):
        chain_checkpoint(g, ["s"], {"s": StepImpl("s", fn=fn, checkpoint=DECL), "src": StepImpl("src", fn=fn)})


@pytest.mark.parametrize(("state_key", "shown"), [(5, "state_key=5"), (None, "state_key=None"),
                                                  ({"user": 1}, "state_key={'user': 1}")])
def test_a_state_key_that_is_no_column_list_is_one_clear_error_at_declaration(state_key: object, shown: str) -> None:
    """``Checkpoint(state_key=5)`` raised ``TypeError: 'int' object is not iterable`` from the dataclass (L7)."""
    with pytest.raises(GraphError, match=re.escape(f"Checkpoint({shown}) must be a column name or a list of column "
                                                   "names")):
        Checkpoint(state_key=state_key, state_schema="user string")  # type: ignore[arg-type]


@pytest.mark.parametrize(("schema", "field", "type_"), [
    ("k notatype", "k notatype", "notatype"),
    ("k string, n lnog", "n lnog", "lnog"),
    ("k string, tags array<strng>", "tags array<strng>", "strng"),
    ("k string, m map<string, integr>", "m map<string, integr>", "integr"),
    ("k string, s struct<x: int, y: flaot>", "s struct<x: int, y: flaot>", "flaot"),
])
def test_a_state_schema_type_spark_does_not_know_is_refused_when_the_dag_renders(schema: str, field: str,
                                                                                 type_: str) -> None:
    """``"k notatype"`` passed every check until Spark's DDL parser refused it in the running task (L7): the
    declaration names the field and the type now."""
    with pytest.raises(GraphError, match=re.escape(f"step 's': Checkpoint: state_schema field {field!r} has type "
                                                   f"{type_!r}")):
        Checkpoint(state_key=["k"], state_schema=schema).check("s")


def test_every_spelling_spark_s_ddl_parser_reads_is_accepted() -> None:
    """The parse-time check refuses unknown type names only: Spark's own spellings (case-insensitive, legacy
    ``name: type``, parameters, nested types, ``NOT NULL`` and ``COMMENT``) still pass."""
    schema = ("k STRING NOT NULL, n bigint COMMENT 'a count, of <things>', d decimal(10, 2), `odd name` int, "
              "t timestamp_ntz, v varchar(5), s struct<x: int, `y z`: array<map<string, double>>>, b binary, "
              "c char(3), f float, r real, day date, ts timestamp, tl timestamp_ltz, by byte, sh short, "
              "ti tinyint, si smallint, i integer, l long, o boolean, e struct<>, dd dec(5), nu numeric")
    assert schema_columns(schema, "x")[:4] == ("k", "n", "d", "odd name")
    assert schema_columns("b: string, a: int", "x") == ("b", "a")
