"""What changed between two images' package lists, as the alert line and `scalebench diff` say it."""
from scalebench.analysis.changes import diff_line, package_diff, render_diff

A = {"python": {"torch": "2.5.1", "nvidia-nccl-cu12": "2.21.5", "numpy": "2.1.0", "six": "1.16.0"},
     "debian": {"libc6": "2.36-9"}, "cuda": {"nvidia-nccl-cu12": "2.21.5", "libcudart": "12", "cuda_version": "12.4.1"}}
B = {"python": {"torch": "2.6.0", "nvidia-nccl-cu12": "2.23.4", "numpy": "2.1.0", "extra": "1.0"},
     "debian": {"libc6": "2.36-9+deb12u1"}, "cuda": {"nvidia-nccl-cu12": "2.23.4", "libcudart": "12",
                                                  "cuda_version": "12.6.0"}}


def test_the_diff_names_changed_new_and_removed_packages_per_section_once():
    d = package_diff(A, B)
    assert d["python"] == ["extra (new) 1.0", "nvidia-nccl-cu12 2.21.5 -> 2.23.4", "six 1.16.0 (removed)",
                           "torch 2.5.1 -> 2.6.0"]
    assert d["cuda"] == ["cuda_version 12.4.1 -> 12.6.0"]  # NVIDIA's wheels are told once, under python
    assert d["debian"] == ["libc6 2.36-9 -> 2.36-9+deb12u1"]
    assert package_diff(A, None) is None and package_diff(A, A) == {"python": [], "cuda": [], "debian": []}


def test_the_one_line_form_says_the_packages_first_and_the_config():
    line = diff_line(package_diff(A, B), config_changed=False)
    assert line.startswith("extra (new) 1.0, nvidia-nccl-cu12 2.21.5 -> 2.23.4, six 1.16.0 (removed), torch 2.5.1 -> "
                           "2.6.0, cuda_version 12.4.1 -> 12.6.0, libc6") and line.endswith("; config: unchanged")
    assert diff_line(package_diff(A, A), True) == "no package changed; config: changed"
    assert diff_line(None).startswith("packages unknown")
    many = {"python": {f"p{i}": "1" for i in range(12)}, "debian": {}, "cuda": {}}
    assert diff_line(package_diff({"python": {}, "debian": {}, "cuda": {}}, many)).endswith("and 4 more (scalebench diff)")


def test_scalebench_diff_prints_every_section(capsys, isolated_state):
    from scalebench.cli import main
    from scalebench.store.results import Store

    store = Store()
    store.save_image_packages("sha256:" + "a" * 64, "scalebench/torch:a", "scalebench/torch:sha256-aaaaaaaaaaaa", A)
    store.save_image_packages("sha256:" + "b" * 64, "scalebench/torch:b", "scalebench/torch:sha256-bbbbbbbbbbbb", B)
    assert main(["diff", "scalebench/torch:a", "sha256:" + "b" * 64]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "scalebench/torch:a (sha256:aaaaaaaaaaaa) -> sha256:" + "b" * 64 + " (sha256:bbbbbbbbbbbb)"
    assert "python: 4 changed\n  extra (new) 1.0\n" in out and "debian: 1 changed" in out
    assert render_diff("a", "b", None).startswith("a -> b: no package list")
    assert main(["diff", "scalebench/torch:a", "scalebench/torch:nowhere"]) == 2
    assert "image 'scalebench/torch:nowhere': no package list" in capsys.readouterr().err
