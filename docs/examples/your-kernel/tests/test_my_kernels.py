"""Numerics of our kernels in the simulator, through the devkit pytest plugin's fixtures."""

import pytest


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", [{"R": 256, "N": 2048}, {"R": 130, "N": 77}])
def test_scaled_add_matches_reference(devkit_check, shape, dtype):
    devkit_check("scaled_add", shape, dtype)


def test_config_space_is_checked(devkit_check):
    devkit_check("scaled_add", {"R": 64, "N": 300}, "float32", blocks={"tile_n": 128})


@pytest.mark.target("trn2")
def test_target_marker(devkit_target, devkit_estimate):
    assert devkit_target == "trn2"
    assert devkit_estimate("scaled_add", {"R": 1024, "N": 4096}, "bfloat16") > 0
