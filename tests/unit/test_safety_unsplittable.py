"""Issue 20, items 2 and 3: asm templates and pragmas the check cannot be talked past (real clang -E).

Every way a byte can reach an asm template (escapes of every form, string concatenation, macros, a raw
byte in the file, prefixed strings) ends at the same rule: no control character but newline and tab.
Pragmas are checked on the raw lines before the preprocessor can act on them, `_Pragma` only with a
literal, never assembled by token pasting.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from evaluator.safety import Violation, _constant, _decode_c_string, check_directives, check_preprocessed
from evaluator.targets import load_target
from evaluator.toolchain import Toolchain, check_cflags

SIG = "void saxpy(int n, float a, const float *x, float *y)"
LOOP = "for (int i = 0; i < n; i++) y[i] += a * x[i];"
VSET = "vsetivli zero, 4, e32, m1, ta, ma"


def violations(code: str, tmp_path: Path, target: str = "k1-x60") -> list[Violation]:
    found = check_directives(code)
    if found:
        return found
    profile = load_target(target)
    kind = "emulator" if profile.is_riscv else "host"
    pre = Toolchain(tmp_path / "objs").preprocess(code, profile, kind, tmp_path)
    return check_preprocessed(pre, "saxpy", asm=profile.is_riscv)


def kernel(body: str, head: str = "") -> str:
    return f"{head}\n{SIG} {{ {body} {LOOP} }}\n"


def asm(template: str, head: str = "") -> str:
    return kernel(f"__asm__ volatile({template});", head)


# (source, words the reason must contain)
SPLIT_ASM = {
    "cr_escape": (asm(f'"{VSET}\\r addi a0, a0, 1"'), "U+000D"),
    "vt_escape": (asm(f'"{VSET}\\v ecall"'), "U+000B"),
    "ff_escape": (asm(f'"{VSET}\\f ecall"'), "U+000C"),
    "hex_escape": (asm(f'"{VSET}\\x0d ecall"'), "U+000D"),
    "octal_escape": (asm(f'"{VSET}\\015 ecall"'), "U+000D"),
    "ucn_escape": (asm(f'"{VSET}\\u000d ecall"'), "U+000D"),
    "delimited_hex_escape": (asm(f'"{VSET}\\x{{d}} ecall"'), "U+000D"),
    "delimited_octal_escape": (asm(f'"{VSET}\\o{{15}} ecall"'), "U+000D"),
    "named_escape": (asm(f'"{VSET}\\N{{CARRIAGE RETURN}} ecall"'), "U+000D"),
    "concatenated": (asm(f'"{VSET}" "\\r" "ecall"'), "U+000D"),
    "from_a_macro": (asm(f'"{VSET}" CR "ecall"', '#define CR "\\r"'), "U+000D"),
    "stringized": (asm(f'"{VSET}" S(\\r) "ecall"', "#define S(x) #x"), "U+000D"),
    "nul_escape": (asm(f'"{VSET}\\0 ecall"'), "U+0000"),
    "escape_char": (asm(f'"{VSET}\\e ecall"'), "U+001B"),
    "raw_cr_byte": (asm(f'"{VSET}\r ecall"'), "U+000D"),
    "wide_string": (asm(f'"{VSET}" L"\\r ecall"'), 'L"..."'),
    "utf8_string": (asm(f'u8"{VSET}\\r ecall"'), 'u8"..."'),
    "non_ascii": (asm(f'"{VSET}\\u00a0ecall"'), "non-ASCII"),
    "semicolon": (asm(f'"{VSET}; ecall"'), "`ecall`"),
}


@pytest.mark.parametrize("case", sorted(SPLIT_ASM))
def test_no_second_statement_hides_in_an_asm_template(case: str, tmp_path: Path) -> None:
    code, reason = SPLIT_ASM[case]
    found = violations(code, tmp_path)
    assert any(reason in v.message for v in found), [str(v) for v in found]


def test_newlines_and_tabs_still_separate_vector_instructions(tmp_path: Path) -> None:
    assert violations(asm(f'"{VSET}\\n\\tvadd.vv v1, v2, v3"'), tmp_path) == []


def test_inline_asm_is_refused_on_the_host_target(tmp_path: Path) -> None:
    found = violations(asm('"vpxor %xmm0, %xmm0, %xmm0\\r syscall"'), tmp_path, "host")
    assert any("not allowed on the host target" in v.message for v in found), found
    assert violations(kernel(""), tmp_path, "host") == []


def test_every_escape_form_is_decoded() -> None:
    assert _decode_c_string(r"a\x{41}\o{101}\u{41}\N{LATIN CAPITAL LETTER A}\101\x41\u0041") == "a" + "A" * 7
    assert _decode_c_string(r"\N{NO SUCH CHARACTER}\q") == "\ufffd\ufffd"  # refused, never guessed


PRAGMAS = {
    "gcc_dependency": ('#pragma GCC dependency "/etc/hostname"\n' + kernel(""), "#pragma GCC dependency"),
    "debug_crash": ("#pragma clang __debug crash\n" + kernel(""), "#pragma clang __debug"),
    "poison": ("#pragma GCC poison saxpy\n" + kernel(""), "#pragma GCC poison"),
    "in_a_dead_branch": ('#if 0\n#pragma GCC dependency "/x"\n#endif\n' + kernel(""), "#pragma GCC dependency"),
    "pragma_operator": ('_Pragma("GCC dependency \\"/etc/hostname\\"")\n' + kernel(""), "#pragma GCC dependency"),
    "operator_of_a_parameter": ('#define P(x) _Pragma(#x)\nP(GCC dependency "/x")\n' + kernel(""), "_Pragma takes"),
    "operator_in_a_macro": ('#define P _Pragma\nP("GCC dependency \\"/x\\"")\n' + kernel(""), "_Pragma takes"),
    "pasted_operator": (
        '#define CAT(a, b) a##b\nCAT(_Pra, gma)("GCC dependency \\"/x\\"")\n' + kernel(""),
        "could build `_Pragma`",
    ),
    "pasted_by_digraph": (
        '#define CAT(a, b) a %:%: b\nCAT(_Pra, gma)("GCC dependency \\"/x\\"")\n' + kernel(""),
        "could build `_Pragma`",
    ),
    "pasted_has_include": ("#define CAT(a, b) a##b\n#if CAT(__has, _include)(<x>)\n#endif\n" + kernel(""), "`__has"),
}


@pytest.mark.parametrize("case", sorted(PRAGMAS))
def test_pragmas_are_checked_before_the_preprocessor_acts_on_them(case: str) -> None:
    code, reason = PRAGMAS[case]
    found = check_directives(code)  # the raw text alone: nothing has been preprocessed yet
    assert any(reason in v.message for v in found), [str(v) for v in found]


def test_allowed_pragmas_pass_in_every_spelling(tmp_path: Path) -> None:
    code = (
        '#pragma clang loop unroll(enable)\n_Pragma("clang loop vectorize(enable)")\n'
        '#define UNROLL _Pragma("unroll 4")\n' + kernel("UNROLL for (int i = 0; i < n; i++) y[i] *= 1.0f;")
    )
    assert violations(code, tmp_path) == []


def test_the_preprocessor_survives_a_crash_pragma_it_never_sees_checked(tmp_path: Path) -> None:
    # Were the raw check skipped, the checker's own clang -E no longer crashes; the pragma is in its output.
    pre = Toolchain(tmp_path / "objs").preprocess(
        "#pragma clang __debug crash\n" + kernel(""), load_target("k1-x60"), "emulator", tmp_path
    )
    assert any("#pragma clang __debug" in v.message for v in check_preprocessed(pre, "saxpy"))


def test_a_raw_string_made_by_pasting_is_refused(tmp_path: Path) -> None:
    code = "#define RAW(p, s) p##s\n" + kernel('const char *s = RAW(R, "(x)"); (void)s;')
    assert any("raw string" in v.message for v in violations(code, tmp_path))


def test_control_characters_anywhere_in_the_source_are_refused() -> None:
    assert "U+000C" in check_directives("\f" + kernel(""))[0].message
    assert check_directives(kernel("").replace("\n", "\r\n")) == []  # CRLF line ends are text


def test_generic_vectors_are_bounded(tmp_path: Path) -> None:
    big = "typedef float v __attribute__((vector_size(1 << 18)));\n" + kernel("")
    found = violations(big, tmp_path)
    assert any("vector_size(262144) is larger than 1024" in v.message for v in found), found
    ext = "typedef float e __attribute__((ext_vector_type(4096)));\n" + kernel("")
    assert any("ext_vector_type(4096)" in v.message for v in violations(ext, tmp_path))
    small = "typedef float v __attribute__((vector_size(8 * sizeof(float))));\n" + kernel("")
    assert violations(small, tmp_path) == []


def test_constant_expressions_are_bounded_not_evaluated_blindly() -> None:
    assert _constant("( 1 << 18 )".split()) == 1 << 18
    assert _constant("( 4 * sizeof ( float ) )".split()) == 16
    assert _constant("( 1 << 100000000000 )".split()) is None  # a shift past 63: not a size, no huge integer
    assert _constant("( N )".split()) is None


@pytest.mark.parametrize(
    "opt", ["-unroll-count=100000", "-unroll-threshold=1000000", "-inline-threshold=99999", "-unroll-count=x"]
)
def test_llvm_options_that_hold_the_compiler_are_bounded(opt: str) -> None:
    out, reason = check_cflags(["-mllvm", opt])
    assert out == [] and reason and "must be a whole number" in reason


def test_llvm_options_within_bounds_pass() -> None:
    assert check_cflags(["-mllvm", "-unroll-count=8"]) == (["-mllvm", "-unroll-count=8"], None)


@pytest.mark.parametrize("unit", ['asm("nop"); ', "static const int k = 1; "])
def test_the_check_stays_linear_on_a_hostile_source(unit: str) -> None:
    # 240 KB of asm statements took the checker 48 s (a slice of every later token per statement).
    pre = '# 1 "candidate.c"\nvoid saxpy(int n) { ' + unit * (240_000 // len(unit)) + " }\n"
    start = time.process_time()
    check_preprocessed(pre, "saxpy")
    assert time.process_time() - start < 20
