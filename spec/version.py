"""The version of this specification (the op definitions, their constraints, semantics and accuracy
classes).  Conformance suites name the spec version they check; it changes whenever a definition
changes what an implementation must do."""

SPEC_VERSION = "1.1"
