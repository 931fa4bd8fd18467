"""benchmarks/torchrun_job.py: the host-cost benchmarks' shared command line, through each
script that uses it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from benchmarks import ddp_host_cost, fsdp_host_cost


@pytest.mark.parametrize("main", [ddp_host_cost.main, fsdp_host_cost.main],
                         ids=["ddp", "fsdp"])
@pytest.mark.parametrize("argv, needle", [
    (["--models", "gpt,t5"], "--models t5 unknown"),
    (["--rounds", "0"], "--samples and --rounds must be >= 1"),
    (["--samples", "0"], "--samples and --rounds must be >= 1"),
])
def test_argument_errors(main: Callable[[Sequence[str] | None], int], argv: list[str],
                         needle: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and needle in capsys.readouterr().err
