"""``bulk_json``: the cyclic collector is paused around a one-shot command's large answer and
left as the caller had it afterwards, also when the command fails."""

from __future__ import annotations

import gc

import pytest

from console.cli.session import bulk_json


def test_collection_is_paused_inside_and_restored_after():
    assert gc.isenabled()
    with bulk_json():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), bulk_json():
        raise RuntimeError("the gateway went away")
    assert gc.isenabled()


def test_a_caller_that_turned_collection_off_keeps_it_off():
    gc.disable()
    try:
        with bulk_json():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
