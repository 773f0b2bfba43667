"""Messages of a failed Pulumi operation say exactly what the engine did before it stopped."""

from __future__ import annotations

from dr.base.errors import ClusterError, ConfigError
from dr.estate.stack import _translate

_REFUSED = """code: 255
 stdout: Destroying (s4):
 +  pulumi:pulumi:Stack kafka-dr-s4 creating (0s)
 +  pulumi:pulumi:Stack kafka-dr-s4 creating (0s) error: error: topology of stack 's4' breaks 1 rule:
 +  pulumi:pulumi:Stack kafka-dr-s4 **creating failed** 1 error
Diagnostics:
  pulumi:pulumi:Stack (kafka-dr-s4):
    error: error: topology of stack 's4' breaks 1 rule:
      - links[0].topics[0]: '(?#x)orders' is refused by Java's regular expressions

Resources:
    + 1 created

Duration: 1s

 stderr: error: update failed
"""


def test_a_refusal_after_the_engine_created_something_says_so() -> None:
    error = _translate(RuntimeError(_REFUSED), "`pulumi destroy` of stack 's4'")
    assert isinstance(error, ConfigError)
    assert "`pulumi destroy` of stack 's4': 1 resource created, then refused the topology" in error.problem
    assert "links[0].topics[0]" in error.problem
    assert "nothing was" not in str(error)


def test_a_refusal_before_any_change_says_nothing_was_changed() -> None:
    text = _REFUSED.replace("    + 1 created\n", "")
    up = _translate(RuntimeError(text), "`pulumi up` of stack 's4'")
    assert isinstance(up, ConfigError) and "refused the topology (nothing was created)" in up.problem
    destroy = _translate(RuntimeError(text), "`pulumi destroy` of stack 's4'")
    assert "refused the topology (nothing was destroyed)" in destroy.problem


def test_a_resource_failure_after_changes_counts_them() -> None:
    text = """ stdout: Updating (local):
Diagnostics:
  kafka-dr:index:MirrorMakerProcess (A-to-B):
    error: MirrorMaker 2 A-to-B could not start (process stopped): connector MirrorSourceConnector: boom

Resources:
    + 14 created
    ~ 1 updated
    3 unchanged

Duration: 40s
"""
    error = _translate(RuntimeError(text), "`pulumi up` of stack 'local'")
    assert isinstance(error, ClusterError)
    assert error.problem.startswith(
        "`pulumi up` of stack 'local': 14 resources created, 1 resource updated, then failed"
    )
    assert "connector MirrorSourceConnector: boom" in error.problem


def test_the_resource_error_is_kept_when_the_engine_prints_outputs_after_it() -> None:
    outputs = "\n".join(f"      ~ key{i}: 1 => 2" for i in range(40))
    text = f""" stdout: Updating (scale):
Diagnostics:
  kafka:index:UserScramCredential (C-user-app011):
    error: kafka server: The broker is not available

Outputs:
  ~ clusters     : {{
{outputs}
    }}

Resources:
    + 48 created
    ~ 3 updated

Duration: 90s
"""
    error = _translate(RuntimeError(text), "`pulumi up` of stack 'scale'")
    assert "C-user-app011" in error.problem and "The broker is not available" in error.problem
    assert "key39" not in error.problem
