"""swir.codegen.c_ast: precedence-aware printing of expressions, declarators,
statements, and a function's prototype derived from its definition."""

from __future__ import annotations

from swir.codegen.c_ast import (
    LONG,
    VOID,
    Array,
    Assign,
    Binary,
    Block,
    Call,
    Cast,
    Comment,
    Decl,
    ExprStmt,
    For,
    Function,
    Id,
    If,
    InitList,
    Lit,
    Named,
    Param,
    Paren,
    Pointer,
    Postfix,
    Return,
    SizeOf,
    Ternary,
    Unary,
    call,
    const,
    index,
    member,
    render,
)

a, b, c, x = Id("a"), Id("b"), Id("c"), Id("x")
FLOAT = Named("float")


def test_binary_parenthesizes_only_what_precedence_needs():
    assert Binary("*", Binary("+", a, b), c).text() == "(a + b) * c"
    assert Binary("+", Binary("*", a, b), c).text() == "a * b + c"
    assert Binary("+", a, Binary("*", b, c)).text() == "a + b * c"


def test_left_associativity():
    assert Binary("-", a, Binary("-", b, c)).text() == "a - (b - c)"
    assert Binary("-", Binary("-", a, b), c).text() == "a - b - c"
    assert Binary("/", a, Binary("*", b, c)).text() == "a / (b * c)"


def test_tight_products_as_swir_writes_index_coefficients():
    term = Binary("*", Lit("2"), Id("oh"), tight=True)
    assert Binary("-", Binary("+", term, Id("kh")), Lit("3")).text() == "2*oh + kh - 3"
    assert Binary("*", Lit("-3"), Cast(LONG, x), tight=True).text() == "-3*(long)x"


def test_logical_and_comparison():
    cond = Binary("||", Binary(">", a, b), Binary("!=", a, a))
    assert cond.text() == "a > b || a != a"
    assert Binary("&&", cond, c).text() == "(a > b || a != a) && c"


def test_casts_bind_tighter_than_binary_operators():
    assert Cast(FLOAT, Binary("/", Lit("1.0"), a)).text() == "(float)(1.0 / a)"
    assert Binary("/", Cast(Named("double"), a), b).text() == "(double)a / b"
    assert Cast(Pointer(Array(FLOAT, 4)), x).text() == "(float (*)[4])x"
    assert Cast(Pointer(FLOAT), x).text() == "(float *)x"
    assert Cast(VOID, x).text() == "(void)x"
    assert Cast(Array(Named("long", const=True)), InitList((Lit("1"), Lit("2")))).text() == \
        "(const long[]){1, 2}"


def test_unary_minus_of_negative_literals_and_of_itself():
    assert Unary("-", Lit("-1")).text() == "-(-1)"
    assert Unary("-", Unary("-", a)).text() == "-(-a)"
    assert Unary("-", Cast(Named("double"), a)).text() == "-(double)a"
    assert Binary("-", a, Lit("-1")).text() == "a - -1"
    assert Binary("*", Lit("-1"), a).text() == "-1 * a"
    assert Unary("-", Binary("+", a, b)).text() == "-(a + b)"


def test_address_and_dereference():
    assert Unary("*", Unary("&", x)).text() == "*&x"
    assert Unary("&", index("A", "i", 3)).text() == "&A[i][3]"
    assert Unary("&", Unary("&", x)).text() == "&(&x)"
    assert Unary("*", Binary("+", Id("p"), Lit("1"))).text() == "*(p + 1)"


def test_postfix_member_index_call():
    assert member("ldm", "k.nested.r1.A").text() == "ldm.k.nested.r1.A"
    assert Call("f", (Binary("+", a, b), Cast(LONG, c))).text() == "f(a + b, (long)c)"
    assert call("swir_min", "a", 4).text() == "swir_min(a, 4)"
    assert index(Paren(Binary("+", Id("p"), Lit("1"))), 0).text() == "(p + 1)[0]"
    assert Postfix(Id("i")).text() == "i++"
    assert SizeOf(member("swir_para", "k")).text() == "sizeof swir_para.k"


def test_ternary_and_assignment():
    t = Ternary(Paren(Binary(">", a, b)), a, b)
    assert t.text() == "(a > b) ? a : b"
    assert Ternary(Binary("<", a, Lit("0")), Unary("-", a), a).text() == "a < 0 ? -a : a"
    assert Binary("+", t, c).text() == "((a > b) ? a : b) + c"
    nested = Ternary(Binary("==", b, Lit("0")), Lit("0"), Ternary(a, b, c))
    assert nested.text() == "b == 0 ? 0 : a ? b : c"
    assert Assign(Id("i"), Lit("4"), "+=").text() == "i += 4"


def test_declarators():
    matrix = Pointer(Array(FLOAT, 1024))
    assert Decl(const(matrix), "A", Cast(matrix, Id("p"))).text() == \
        "float (*const A)[1024] = (float (*)[1024])p;"
    ro = Pointer(Array(Array(Named("float", const=True), 8), 4), const=True)
    assert Decl(ro, "B").text() == "const float (*const B)[4][8];"
    assert Decl(Array(FLOAT, 16), "L", attributes="__attribute__((aligned(32)))").text() == \
        "float L[16] __attribute__((aligned(32)));"
    assert Decl(Pointer(FLOAT), "w", storage="static", comment="@w : f32").text() == \
        "static float *w;   /* @w : f32 */"
    assert Decl(const(LONG), "n", Lit("3")).text() == "const long n = 3;"


def test_statements_indent():
    body = Block([ExprStmt(Assign(index("A", "i"), Lit("0")))])
    loop = For(Decl(LONG, "i", Lit("0")), Binary("<", Id("i"), Lit("8")), Postfix(Id("i")), body)
    branch = If(Binary("<", a, b), Block([Return()]), Block([Comment("else")]))
    assert render([loop, branch], 1) == (
        "    for (long i = 0; i < 8; i++) {\n"
        "        A[i] = 0;\n"
        "    }\n"
        "    if (a < b) {\n"
        "        return;\n"
        "    } else {\n"
        "        /* else */\n"
        "    }")


def test_function_and_its_prototype():
    f = Function("k", [Param(Pointer(FLOAT), "x"), Param(LONG, "n")],
                 Block([ExprStmt(Assign(index("x", 0), Cast(FLOAT, Id("n"))))]),
                 storage="static", comment="@k")
    assert f.prototype() == "static void k(float *x, long n);"
    assert f.text() == ("/* @k */\nstatic void k(float *x, long n)\n{\n"
                        "    x[0] = (float)n;\n}\n")
    assert Function("g", [], Block()).prototype() == "void g(void);"


def test_a_vector_type_and_an_intrinsic_need_no_new_code():
    v4 = Named("floatv4")
    d = Decl(v4, "va", call("simd_vmuls", "vb", "vc"))
    assert d.text() == "floatv4 va = simd_vmuls(vb, vc);"
    assert Cast(Pointer(v4), Id("p")).text() == "(floatv4 *)p"


def test_records_tagged_anonymous_nested_and_typedef():
    from swir.codegen.c_ast import Record, RecordDef, array, render
    aligned = "__attribute__((aligned(64)))"
    inner = Record("struct", (Decl(array(Named("float"), (4, 5)), "a", attributes=aligned),))
    frame = Record("struct", (Decl(array(Named("double"), (3,)), "b", attributes=aligned),
                              Decl(Record("union", (Decl(inner, "r1"),)), "nested")),
                   tag="k_ldm")
    assert render([RecordDef(frame, "@k")]) == (
        "struct k_ldm {   /* @k */\n"
        "    double b[3] __attribute__((aligned(64)));\n"
        "    union {\n"
        "        struct {\n"
        "            float a[4][5] __attribute__((aligned(64)));\n"
        "        } r1;\n"
        "    } nested;\n"
        "};")
    ldm = Decl(Record("union", (Decl(Record("struct", tag="k_ldm"), "k"),)), "ldm",
               storage="static __thread_local", attributes=aligned)
    assert render([ldm]) == ("static __thread_local union {\n"
                             "    struct k_ldm k;\n"
                             "} ldm __attribute__((aligned(64)));")
    para = Decl(Record("struct", (Decl(Pointer(Named("float")), "x", comment="buf<4 x f32>"),
                                  Decl(LONG, "n"))), "k_para", storage="typedef")
    assert render([para]) == ("typedef struct {\n"
                              "    float *x;   /* buf<4 x f32> */\n"
                              "    long n;\n"
                              "} k_para;")
    assert Record("struct", tag="k_ldm").declare("*p") == "struct k_ldm *p"
    assert Array(Named("int"), 2).declare("v") == "int v[2]"
