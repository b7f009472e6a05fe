"""The package's torch side: GPU MODE's data tuple (the door's own code), torch tensors of the
NVFP4 dtypes, and certify() on trusted callables. Skipped, with the reason, without torch; on a
GPU machine they run on CUDA, elsewhere on the CPU."""
import numpy as np
import pytest

import nvfp4_oracle as oracle

torch = pytest.importorskip("torch", reason="torch is not installed: to_gpumode, from_gpumode "
                            "and certify need it (run these on a machine with torch)")


def _device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def test_to_gpumode_round_trips_through_from_gpumode():
    for problem in oracle.PROBLEMS:
        case = oracle.generate(problem, "48x40x96x2", "full", 2)
        data = oracle.to_gpumode(case, _device())
        ref = oracle.reference(case)
        back = oracle.reference(oracle.from_gpumode(data, problem), problem)
        assert np.array_equal(ref.expected.view(np.uint16), back.expected.view(np.uint16)), problem
    a, b1, b2, sfa, sfb1, sfb2, pa, pb1, pb2, c = oracle.to_gpumode(
        oracle.generate("dual-gemm", "40x72x160x2", "full", 2), _device())
    assert a.dtype == torch.float4_e2m1fn_x2 and tuple(a.shape) == (40, 80, 2)
    assert sfa.dtype == torch.float8_e4m3fn and tuple(sfa.shape) == (40, 10, 2)
    assert tuple(pa.shape) == (32, 4, 1, 4, 3, 2)
    assert c.dtype == torch.float16 and tuple(c.shape) == (40, 72, 2)


def test_reference_reads_torch_tensors_of_the_nvfp4_dtypes():
    case = oracle.generate("dual-gemm", "40x72x160", "full", 2)
    as_torch = {}
    for k, v in case.tensors.items():
        t = torch.from_numpy(v)
        if k in ("a", "b1", "b2"):
            t = t.view(torch.float4_e2m1fn_x2)
        elif k.startswith("sf"):
            t = t.view(torch.float8_e4m3fn)
        as_torch[k] = t
    assert np.array_equal(oracle.reference(as_torch).expected.view(np.uint16),
                          oracle.reference(case).expected.view(np.uint16))
    with pytest.raises(TypeError, match="torch.float32"):
        oracle.reference({"a": torch.zeros(4, 8)})


def test_certify_passes_a_correct_callable_and_names_the_case_a_wrong_one_fails():
    def correct(data):
        return torch.from_numpy(oracle.reference(oracle.from_gpumode(data)).expected)

    def doubled(data):
        return correct(data) * 2

    result = oracle.certify(correct, cases=3, seed=1, device=_device())
    fixed = oracle.certify(correct, cases=0, seed=1, device=_device())
    # The campaign's fixed cases (edges, production shapes, stagnation), then the 3 drawn.
    assert result.passed and fixed.passed and result.cases == fixed.cases + 3 > 3
    assert repr(result).startswith("Certification(python-correct (dual-gemm): Certified")
    # The first edge case gives 0 (so does twice it); the next one fails, and is shrunk and
    # diagnosed by the CLI's campaign.
    with pytest.raises(AssertionError, match=r"python-doubled \(dual-gemm\): Failed after 2 "
                                             r"cases .*first failing case 1x1x16 full seed 1"):
        oracle.certify(doubled, cases=3, seed=1, device=_device())


def test_certify_judges_in_place_outputs_group_outputs_and_the_doors_checks(tmp_path):
    def in_place(data):
        expected = oracle.reference(oracle.from_gpumode(data)).expected
        data[-1].copy_(torch.from_numpy(expected).to(data[-1].device))

    assert oracle.certify(in_place, cases=2, seed=3, device=_device()).passed

    def groups(data):
        ref = oracle.reference(oracle.from_gpumode(data, "group-gemm"), "group-gemm")
        flat, at, outs = ref.expected.reshape(-1), 0, []
        for m, n, _ in ref.outputs:
            outs.append(torch.from_numpy(flat[at:at + m * n].reshape(m, n, 1).copy()))
            at += m * n
        return outs

    assert oracle.certify(groups, "group-gemm", cases=2, seed=3, device=_device()).passed

    def writes_its_scales(data):
        out = oracle.reference(oracle.from_gpumode(data)).expected
        data[3].view(torch.uint8).fill_(0)
        return torch.from_numpy(out)

    result = oracle.certify(writes_its_scales, cases=0, device=_device(),
                            raise_on_failure=False, report_dir=tmp_path)
    assert result.failure["verdict"] == ("the kernel modified its inputs: input sfa: its "
                                         "contents changed")

    def wrong_dtype(data):
        return torch.from_numpy(oracle.reference(oracle.from_gpumode(data)).expected).float()

    result = oracle.certify(wrong_dtype, cases=0, device=_device(), raise_on_failure=False,
                            report_dir=tmp_path)
    assert "the output is a torch.float32 tensor" in result.failure["verdict"]


def test_assert_gemm_reads_the_libraries_torch_dtypes():
    # MXFP8 (e4m3) x MXFP4 with float8_e8m0fnu scales, and bf16 x MXFP4, against torch's own
    # dequantize-and-matmul in float64; bf16 output.
    gen = torch.Generator().manual_seed(4)
    m, n, k = 32, 16, 128
    a8 = torch.randint(0, 256, (m, k), dtype=torch.uint8, generator=gen)
    a8[(a8 & 0x7F) == 0x7F] = 0x38
    b4 = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=gen)
    sa = torch.randint(120, 134, (m, k // 32), dtype=torch.uint8, generator=gen)
    sb = torch.randint(120, 134, (n, k // 32), dtype=torch.uint8, generator=gen)
    e2m1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6],
                        dtype=torch.float64)
    b_values = torch.stack([e2m1[(b4 & 0xF).long()], e2m1[(b4 >> 4).long()]], -1).reshape(n, k)
    b_values = b_values * torch.exp2(sb.double() - 127).repeat_interleave(32, 1)
    a_values = a8.view(torch.float8_e4m3fn).double()
    a_values = a_values * torch.exp2(sa.double() - 127).repeat_interleave(32, 1)
    out = (a_values @ b_values.T).to(torch.bfloat16)
    oracle.assert_gemm(out, a8.view(torch.float8_e4m3fn), b4.view(torch.float4_e2m1fn_x2),
                       sa.view(torch.float8_e8m0fnu), sb.view(torch.float8_e8m0fnu),
                       a_format="mxfp8-e4m3", b_format="mxfp4")
    a16 = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    out = (a16.double() @ b_values.T).to(torch.bfloat16)
    oracle.assert_gemm(out, a16, b4.view(torch.float4_e2m1fn_x2), None, sb,
                       a_format="bf16", b_format="mxfp4")
    with pytest.raises(AssertionError):
        oracle.assert_gemm(out * 1.05, a16, b4, None, sb, a_format="bf16", b_format="mxfp4")
