"""A sample of generated valid settings (several keys changed at once): every gcloud command our builders
make from them parses in the real gcloud (exit 2 would mean our flags are wrong)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from reliability import counts, generated


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow])
@given(s=generated.valid_settings())
def test_generated_valid_settings_give_gcloud_commands_that_parse(s, gcloud_parse):
    counts.add("cases")
    commands = [argv for argv in generated.commands(s) if argv[0] == "gcloud"]
    results = gcloud_parse(commands)
    bad = {" ".join(argv): err[-500:] for argv, (code, err) in results.items() if code == 2}
    assert len(commands) >= 10 and not bad, bad
