graph [
  directed 1
  step 4
  node [
    id 0
    label "FW.tok_emb"
    cat "FW"
    dur_us 120.128
    step 4
  ]
  node [
    id 1
    label "FW.pos_emb"
    cat "FW"
    dur_us 45.868
    step 4
  ]
  node [
    id 2
    label "FW.blocks.0.ln1"
    cat "FW"
    dur_us 115.511
    step 4
  ]
  node [
    id 3
    label "FW.blocks.0.attn.qkv"
    cat "FW"
    dur_us 13992.069
    step 4
  ]
  node [
    id 4
    label "FW.blocks.0.attn.proj"
    cat "FW"
    dur_us 374.725
    step 4
  ]
  node [
    id 5
    label "FW.blocks.0.ln2"
    cat "FW"
    dur_us 102.843
    step 4
  ]
  node [
    id 6
    label "FW.blocks.0.mlp.fc1"
    cat "FW"
    dur_us 7615.678
    step 4
  ]
  node [
    id 7
    label "FW.blocks.0.mlp.act"
    cat "FW"
    dur_us 262.408
    step 4
  ]
  node [
    id 8
    label "FW.blocks.0.mlp.fc2"
    cat "FW"
    dur_us 1004.297
    step 4
  ]
  node [
    id 9
    label "FW.blocks.1.ln1"
    cat "FW"
    dur_us 101.33
    step 4
  ]
  node [
    id 10
    label "FW.blocks.1.attn.qkv"
    cat "FW"
    dur_us 758.253
    step 4
  ]
  node [
    id 11
    label "FW.blocks.1.attn.proj"
    cat "FW"
    dur_us 257.331
    step 4
  ]
  node [
    id 12
    label "FW.blocks.1.ln2"
    cat "FW"
    dur_us 117.724
    step 4
  ]
  node [
    id 13
    label "FW.blocks.1.mlp.fc1"
    cat "FW"
    dur_us 960.402
    step 4
  ]
  node [
    id 14
    label "FW.blocks.1.mlp.act"
    cat "FW"
    dur_us 246.585
    step 4
  ]
  node [
    id 15
    label "FW.blocks.1.mlp.fc2"
    cat "FW"
    dur_us 813.515
    step 4
  ]
  node [
    id 16
    label "FW.blocks.2.ln1"
    cat "FW"
    dur_us 84.736
    step 4
  ]
  node [
    id 17
    label "FW.blocks.2.attn.qkv"
    cat "FW"
    dur_us 7431.124
    step 4
  ]
  node [
    id 18
    label "FW.blocks.2.attn.proj"
    cat "FW"
    dur_us 236.06
    step 4
  ]
  node [
    id 19
    label "FW.blocks.2.ln2"
    cat "FW"
    dur_us 112.406
    step 4
  ]
  node [
    id 20
    label "FW.blocks.2.mlp.fc1"
    cat "FW"
    dur_us 7601.637
    step 4
  ]
  node [
    id 21
    label "FW.blocks.2.mlp.act"
    cat "FW"
    dur_us 404.729
    step 4
  ]
  node [
    id 22
    label "FW.blocks.2.mlp.fc2"
    cat "FW"
    dur_us 866.653
    step 4
  ]
  node [
    id 23
    label "FW.blocks.3.ln1"
    cat "FW"
    dur_us 97.444
    step 4
  ]
  node [
    id 24
    label "FW.blocks.3.attn.qkv"
    cat "FW"
    dur_us 593.378
    step 4
  ]
  node [
    id 25
    label "FW.blocks.3.attn.proj"
    cat "FW"
    dur_us 498.879
    step 4
  ]
  node [
    id 26
    label "FW.blocks.3.ln2"
    cat "FW"
    dur_us 175.309
    step 4
  ]
  node [
    id 27
    label "FW.blocks.3.mlp.fc1"
    cat "FW"
    dur_us 955.185
    step 4
  ]
  node [
    id 28
    label "FW.blocks.3.mlp.act"
    cat "FW"
    dur_us 275.598
    step 4
  ]
  node [
    id 29
    label "FW.blocks.3.mlp.fc2"
    cat "FW"
    dur_us 9715.557
    step 4
  ]
  node [
    id 30
    label "FW.ln_f"
    cat "FW"
    dur_us 142.31
    step 4
  ]
  node [
    id 31
    label "FW.head"
    cat "FW"
    dur_us 768.057
    step 4
  ]
  node [
    id 32
    label "BW.head"
    cat "BW"
    dur_us 990.577
    step 4
  ]
  node [
    id 33
    label "BW.ln_f"
    cat "BW"
    dur_us 130.373
    step 4
  ]
  node [
    id 34
    label "BW.blocks.3.mlp.fc2"
    cat "BW"
    dur_us 19102.708
    step 4
  ]
  node [
    id 35
    label "BW.blocks.3.mlp.act"
    cat "BW"
    dur_us 1389.607
    step 4
  ]
  node [
    id 36
    label "BW.blocks.3.mlp.fc1"
    cat "BW"
    dur_us 2069.735
    step 4
  ]
  node [
    id 37
    label "BW.blocks.3.ln2"
    cat "BW"
    dur_us 198.144
    step 4
  ]
  node [
    id 38
    label "BW.blocks.3.attn.proj"
    cat "BW"
    dur_us 546.319
    step 4
  ]
  node [
    id 39
    label "BW.blocks.3.attn.qkv"
    cat "BW"
    dur_us 3251.655
    step 4
  ]
  node [
    id 40
    label "BW.blocks.3.ln1"
    cat "BW"
    dur_us 139.487
    step 4
  ]
  node [
    id 41
    label "BW.blocks.2.mlp.fc2"
    cat "BW"
    dur_us 12011.778
    step 4
  ]
  node [
    id 42
    label "BW.blocks.2.mlp.act"
    cat "BW"
    dur_us 413.192
    step 4
  ]
  node [
    id 43
    label "BW.blocks.2.mlp.fc1"
    cat "BW"
    dur_us 1938.961
    step 4
  ]
  node [
    id 44
    label "BW.blocks.2.ln2"
    cat "BW"
    dur_us 147.018
    step 4
  ]
  node [
    id 45
    label "BW.blocks.2.attn.proj"
    cat "BW"
    dur_us 493.251
    step 4
  ]
  node [
    id 46
    label "BW.blocks.2.attn.qkv"
    cat "BW"
    dur_us 3339.946
    step 4
  ]
  node [
    id 47
    label "BW.blocks.2.ln1"
    cat "BW"
    dur_us 126.868
    step 4
  ]
  node [
    id 48
    label "BW.blocks.1.mlp.fc2"
    cat "BW"
    dur_us 1553.49
    step 4
  ]
  node [
    id 49
    label "BW.blocks.1.mlp.act"
    cat "BW"
    dur_us 394.374
    step 4
  ]
  node [
    id 50
    label "BW.blocks.1.mlp.fc1"
    cat "BW"
    dur_us 10382.405
    step 4
  ]
  node [
    id 51
    label "BW.blocks.1.ln2"
    cat "BW"
    dur_us 167.007
    step 4
  ]
  node [
    id 52
    label "BW.blocks.1.attn.proj"
    cat "BW"
    dur_us 539.318
    step 4
  ]
  node [
    id 53
    label "BW.blocks.1.attn.qkv"
    cat "BW"
    dur_us 1359.213
    step 4
  ]
  node [
    id 54
    label "BW.blocks.1.ln1"
    cat "BW"
    dur_us 141.439
    step 4
  ]
  node [
    id 55
    label "BW.blocks.0.mlp.fc2"
    cat "BW"
    dur_us 1810.981
    step 4
  ]
  node [
    id 56
    label "BW.blocks.0.mlp.act"
    cat "BW"
    dur_us 405.661
    step 4
  ]
  node [
    id 57
    label "BW.blocks.0.mlp.fc1"
    cat "BW"
    dur_us 14574.973
    step 4
  ]
  node [
    id 58
    label "BW.blocks.0.ln2"
    cat "BW"
    dur_us 164.053
    step 4
  ]
  node [
    id 59
    label "BW.blocks.0.attn.proj"
    cat "BW"
    dur_us 583.284
    step 4
  ]
  node [
    id 60
    label "BW.blocks.0.attn.qkv"
    cat "BW"
    dur_us 5615.065
    step 4
  ]
  node [
    id 61
    label "BW.blocks.0.ln1"
    cat "BW"
    dur_us 163.683
    step 4
  ]
  node [
    id 62
    label "BW.pos_emb"
    cat "BW"
    dur_us 31.847
    step 4
  ]
  node [
    id 63
    label "BW.tok_emb"
    cat "BW"
    dur_us 49.533
    step 4
  ]
  node [
    id 64
    label "UPDATE.AdamW"
    cat "UPDATE"
    dur_us 2891.682
    step 4
  ]
  node [
    id 65
    label "Comm.bucket0"
    cat "Comm"
    dur_us 25783.201
    step 4
  ]
  node [
    id 66
    label "Comm.bucket1"
    cat "Comm"
    dur_us 10446.069
    step 4
  ]
  node [
    id 67
    label "NEXT_STEP"
    cat "sink"
    dur_us 0.0
    step 4
  ]
  edge [
    source 0
    target 1
  ]
  edge [
    source 1
    target 2
  ]
  edge [
    source 2
    target 3
  ]
  edge [
    source 3
    target 4
  ]
  edge [
    source 4
    target 5
  ]
  edge [
    source 5
    target 6
  ]
  edge [
    source 6
    target 7
  ]
  edge [
    source 7
    target 8
  ]
  edge [
    source 8
    target 9
  ]
  edge [
    source 9
    target 10
  ]
  edge [
    source 10
    target 11
  ]
  edge [
    source 11
    target 12
  ]
  edge [
    source 12
    target 13
  ]
  edge [
    source 13
    target 14
  ]
  edge [
    source 14
    target 15
  ]
  edge [
    source 15
    target 16
  ]
  edge [
    source 16
    target 17
  ]
  edge [
    source 17
    target 18
  ]
  edge [
    source 18
    target 19
  ]
  edge [
    source 19
    target 20
  ]
  edge [
    source 20
    target 21
  ]
  edge [
    source 21
    target 22
  ]
  edge [
    source 22
    target 23
  ]
  edge [
    source 23
    target 24
  ]
  edge [
    source 24
    target 25
  ]
  edge [
    source 25
    target 26
  ]
  edge [
    source 26
    target 27
  ]
  edge [
    source 27
    target 28
  ]
  edge [
    source 28
    target 29
  ]
  edge [
    source 29
    target 30
  ]
  edge [
    source 30
    target 31
  ]
  edge [
    source 31
    target 32
  ]
  edge [
    source 32
    target 33
  ]
  edge [
    source 33
    target 34
  ]
  edge [
    source 34
    target 35
  ]
  edge [
    source 35
    target 36
  ]
  edge [
    source 36
    target 37
  ]
  edge [
    source 37
    target 38
  ]
  edge [
    source 38
    target 39
  ]
  edge [
    source 39
    target 40
  ]
  edge [
    source 40
    target 41
  ]
  edge [
    source 41
    target 42
  ]
  edge [
    source 41
    target 65
  ]
  edge [
    source 42
    target 43
  ]
  edge [
    source 43
    target 44
  ]
  edge [
    source 44
    target 45
  ]
  edge [
    source 45
    target 46
  ]
  edge [
    source 46
    target 47
  ]
  edge [
    source 47
    target 48
  ]
  edge [
    source 48
    target 49
  ]
  edge [
    source 49
    target 50
  ]
  edge [
    source 50
    target 51
  ]
  edge [
    source 51
    target 52
  ]
  edge [
    source 52
    target 53
  ]
  edge [
    source 53
    target 54
  ]
  edge [
    source 54
    target 55
  ]
  edge [
    source 55
    target 56
  ]
  edge [
    source 56
    target 57
  ]
  edge [
    source 57
    target 58
  ]
  edge [
    source 58
    target 59
  ]
  edge [
    source 59
    target 60
  ]
  edge [
    source 60
    target 61
  ]
  edge [
    source 61
    target 62
  ]
  edge [
    source 62
    target 63
  ]
  edge [
    source 63
    target 64
  ]
  edge [
    source 63
    target 66
  ]
  edge [
    source 64
    target 67
  ]
  edge [
    source 65
    target 64
  ]
  edge [
    source 66
    target 64
  ]
]
