"""The op registry and each stage's op set (see docs/ir.md)."""
