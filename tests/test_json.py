"""moss.json from a project script: ordered objects, null members, errors that name the line."""

from __future__ import annotations


def test_ordered_decode_keeps_key_order_and_nulls(project):
    project.script("j", """
        local v = moss.json.decode('{"lr": [0.1, 0.01], "bs": 32, "drop": null, "opt": {"z": 1, "a": 2}}',
                                   { ordered = true })
        print(table.concat(moss.json.keys(v), ","), table.concat(moss.json.keys(v.opt), ","))
        print(v.drop == moss.json.null, moss.json.is_object(v), moss.json.is_object(v.lr))
        local plain = moss.json.decode('{"z": 1, "a": 2}')
        print(table.concat(moss.json.keys(plain), ","), moss.json.is_object(plain))
    """)
    r = project.moss("@j")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["lr,bs,drop,opt\tz,a", "true\ttrue\tfalse", "a,z\tfalse"]


def test_bad_json_names_the_script_line(project):
    project.script("bad", 'local x = 1\nmoss.json.decode("{oops", { ordered = true })\n')
    r = project.moss("@bad")
    assert r.returncode == 2  # a usage error, uncaught
    assert ".moss/scripts/bad.lua:2: moss.json.decode: invalid JSON at line 1, column 2" in r.stderr
