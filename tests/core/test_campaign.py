"""The hidden-case secret: drawn on the trusted side, never stored or shown."""

from __future__ import annotations

from kernelproof_core.campaign import Campaign


def test_hidden_seed_is_drawn_and_never_in_the_public_dump() -> None:
    campaign = Campaign(device="interpreter", dtypes=["bfloat16"])
    assert campaign.uses_hidden_cases and campaign.hidden_seed is not None
    public = campaign.public_dump()
    assert "hidden_seed" not in public
    rebuilt = Campaign.model_validate(public)  # what a worker does with a stored campaign
    assert rebuilt.hidden_seed is not None and rebuilt.hidden_seed != campaign.hidden_seed
    assert Campaign.model_validate(public).public_dump() == public  # the reuse key does not change with the secret


def test_explicit_case_lists_have_no_hidden_cases_unless_asked() -> None:
    assert not Campaign(device="interpreter", dtypes=["float32"], case_ids=["n1"]).uses_hidden_cases
    assert Campaign(device="interpreter", dtypes=["float32"], case_ids=["n1"], hidden_cases=True).uses_hidden_cases
