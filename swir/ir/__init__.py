"""The IR core: types, index expressions, values, instructions, blocks, regions,
functions, modules, and the builder."""

from swir.ir.affine import Expr
from swir.ir.core import (Access, Apply, Block, BlockArgument, Constraint, Dense, DenseSlot,
                          ArrayInit, FileInit, FuncParam, Function, Global, Instruction, Literal, Module,
                          Range, Region, Result, Successor, SymbolRef, Value)
from swir.ir.types import (F16, F32, F64, I1, I8, I16, I32, I64, INDEX, BufType, LDMType,
                           ScalarType, ShapedType, TensorType, Type)

__all__ = [
    "Access", "Apply", "Block", "BlockArgument", "BufType", "Constraint", "Dense", "DenseSlot",
    "Expr", "F16", "F32", "F64", "ArrayInit", "FileInit", "FuncParam", "Function", "Global", "I1", "I8",
    "I16", "I32", "I64", "INDEX", "Instruction", "LDMType", "Literal", "Module", "Range",
    "Region", "Result", "ScalarType", "ShapedType", "Successor", "SymbolRef", "TensorType",
    "Type", "Value",
]
