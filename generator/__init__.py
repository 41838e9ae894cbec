"""kwire's compiler: Kafka-dialect JSON message schemas in, typed Python codecs out.

Pipeline: loader (lenient JSON + meta-schema) -> model (semantic checks) -> plan (per-version wire
steps) -> render (Jinja templates, black). See docs/compiler.md and ../shared/design.md.
"""
