graph [
  directed 1
  step 4
  node [
    id 0
    label "FW.tok_emb"
    cat "FW"
    dur_us 197.052
    step 4
  ]
  node [
    id 1
    label "FW.pos_emb"
    cat "FW"
    dur_us 69.322
    step 4
  ]
  node [
    id 2
    label "FW.blocks.0.ln1"
    cat "FW"
    dur_us 127.569
    step 4
  ]
  node [
    id 3
    label "FW.blocks.0.attn.qkv"
    cat "FW"
    dur_us 794.486
    step 4
  ]
  node [
    id 4
    label "FW.blocks.0.attn.proj"
    cat "FW"
    dur_us 234.097
    step 4
  ]
  node [
    id 5
    label "FW.blocks.0.ln2"
    cat "FW"
    dur_us 83.033
    step 4
  ]
  node [
    id 6
    label "FW.blocks.0.mlp.fc1"
    cat "FW"
    dur_us 769.139
    step 4
  ]
  node [
    id 7
    label "FW.blocks.0.mlp.act"
    cat "FW"
    dur_us 232.354
    step 4
  ]
  node [
    id 8
    label "FW.blocks.0.mlp.fc2"
    cat "FW"
    dur_us 806.494
    step 4
  ]
  node [
    id 9
    label "FW.blocks.1.ln1"
    cat "FW"
    dur_us 79.548
    step 4
  ]
  node [
    id 10
    label "FW.blocks.1.attn.qkv"
    cat "FW"
    dur_us 9018.996
    step 4
  ]
  node [
    id 11
    label "FW.blocks.1.attn.proj"
    cat "FW"
    dur_us 247.366
    step 4
  ]
  node [
    id 12
    label "FW.blocks.1.ln2"
    cat "FW"
    dur_us 120.979
    step 4
  ]
  node [
    id 13
    label "FW.blocks.1.mlp.fc1"
    cat "FW"
    dur_us 863.909
    step 4
  ]
  node [
    id 14
    label "FW.blocks.1.mlp.act"
    cat "FW"
    dur_us 8587.356
    step 4
  ]
  node [
    id 15
    label "FW.blocks.1.mlp.fc2"
    cat "FW"
    dur_us 874.695
    step 4
  ]
  node [
    id 16
    label "FW.blocks.2.ln1"
    cat "FW"
    dur_us 91.726
    step 4
  ]
  node [
    id 17
    label "FW.blocks.2.attn.qkv"
    cat "FW"
    dur_us 618.485
    step 4
  ]
  node [
    id 18
    label "FW.blocks.2.attn.proj"
    cat "FW"
    dur_us 229.019
    step 4
  ]
  node [
    id 19
    label "FW.blocks.2.ln2"
    cat "FW"
    dur_us 78.065
    step 4
  ]
  node [
    id 20
    label "FW.blocks.2.mlp.fc1"
    cat "FW"
    dur_us 9477.184
    step 4
  ]
  node [
    id 21
    label "FW.blocks.2.mlp.act"
    cat "FW"
    dur_us 268.487
    step 4
  ]
  node [
    id 22
    label "FW.blocks.2.mlp.fc2"
    cat "FW"
    dur_us 838.191
    step 4
  ]
  node [
    id 23
    label "FW.blocks.3.ln1"
    cat "FW"
    dur_us 100.328
    step 4
  ]
  node [
    id 24
    label "FW.blocks.3.attn.qkv"
    cat "FW"
    dur_us 707.908
    step 4
  ]
  node [
    id 25
    label "FW.blocks.3.attn.proj"
    cat "FW"
    dur_us 274.567
    step 4
  ]
  node [
    id 26
    label "FW.blocks.3.ln2"
    cat "FW"
    dur_us 111.705
    step 4
  ]
  node [
    id 27
    label "FW.blocks.3.mlp.fc1"
    cat "FW"
    dur_us 863.979
    step 4
  ]
  node [
    id 28
    label "FW.blocks.3.mlp.act"
    cat "FW"
    dur_us 230.281
    step 4
  ]
  node [
    id 29
    label "FW.blocks.3.mlp.fc2"
    cat "FW"
    dur_us 6823.013
    step 4
  ]
  node [
    id 30
    label "FW.ln_f"
    cat "FW"
    dur_us 116.413
    step 4
  ]
  node [
    id 31
    label "FW.head"
    cat "FW"
    dur_us 505.639
    step 4
  ]
  node [
    id 32
    label "BW.head"
    cat "BW"
    dur_us 1017.256
    step 4
  ]
  node [
    id 33
    label "BW.ln_f"
    cat "BW"
    dur_us 132.527
    step 4
  ]
  node [
    id 34
    label "BW.blocks.3.mlp.fc2"
    cat "BW"
    dur_us 13089.683
    step 4
  ]
  node [
    id 35
    label "BW.blocks.3.mlp.act"
    cat "BW"
    dur_us 515.053
    step 4
  ]
  node [
    id 36
    label "BW.blocks.3.mlp.fc1"
    cat "BW"
    dur_us 8056.58
    step 4
  ]
  node [
    id 37
    label "BW.blocks.3.ln2"
    cat "BW"
    dur_us 143.883
    step 4
  ]
  node [
    id 38
    label "BW.blocks.3.attn.proj"
    cat "BW"
    dur_us 536.124
    step 4
  ]
  node [
    id 39
    label "BW.blocks.3.attn.qkv"
    cat "BW"
    dur_us 7917.144
    step 4
  ]
  node [
    id 40
    label "BW.blocks.3.ln1"
    cat "BW"
    dur_us 139.156
    step 4
  ]
  node [
    id 41
    label "BW.blocks.2.mlp.fc2"
    cat "BW"
    dur_us 6888.33
    step 4
  ]
  node [
    id 42
    label "BW.blocks.2.mlp.act"
    cat "BW"
    dur_us 431.88
    step 4
  ]
  node [
    id 43
    label "BW.blocks.2.mlp.fc1"
    cat "BW"
    dur_us 10538.516
    step 4
  ]
  node [
    id 44
    label "BW.blocks.2.ln2"
    cat "BW"
    dur_us 142.791
    step 4
  ]
  node [
    id 45
    label "BW.blocks.2.attn.proj"
    cat "BW"
    dur_us 474.893
    step 4
  ]
  node [
    id 46
    label "BW.blocks.2.attn.qkv"
    cat "BW"
    dur_us 4406.315
    step 4
  ]
  node [
    id 47
    label "BW.blocks.2.ln1"
    cat "BW"
    dur_us 135.471
    step 4
  ]
  node [
    id 48
    label "BW.blocks.1.mlp.fc2"
    cat "BW"
    dur_us 7811.177
    step 4
  ]
  node [
    id 49
    label "BW.blocks.1.mlp.act"
    cat "BW"
    dur_us 3047.924
    step 4
  ]
  node [
    id 50
    label "BW.blocks.1.mlp.fc1"
    cat "BW"
    dur_us 10815.065
    step 4
  ]
  node [
    id 51
    label "BW.blocks.1.ln2"
    cat "BW"
    dur_us 169.861
    step 4
  ]
  node [
    id 52
    label "BW.blocks.1.attn.proj"
    cat "BW"
    dur_us 467.813
    step 4
  ]
  node [
    id 53
    label "BW.blocks.1.attn.qkv"
    cat "BW"
    dur_us 2221.78
    step 4
  ]
  node [
    id 54
    label "BW.blocks.1.ln1"
    cat "BW"
    dur_us 169.581
    step 4
  ]
  node [
    id 55
    label "BW.blocks.0.mlp.fc2"
    cat "BW"
    dur_us 1993.282
    step 4
  ]
  node [
    id 56
    label "BW.blocks.0.mlp.act"
    cat "BW"
    dur_us 8883.114
    step 4
  ]
  node [
    id 57
    label "BW.blocks.0.mlp.fc1"
    cat "BW"
    dur_us 1781.268
    step 4
  ]
  node [
    id 58
    label "BW.blocks.0.ln2"
    cat "BW"
    dur_us 155.4
    step 4
  ]
  node [
    id 59
    label "BW.blocks.0.attn.proj"
    cat "BW"
    dur_us 468.173
    step 4
  ]
  node [
    id 60
    label "BW.blocks.0.attn.qkv"
    cat "BW"
    dur_us 5676.255
    step 4
  ]
  node [
    id 61
    label "BW.blocks.0.ln1"
    cat "BW"
    dur_us 212.916
    step 4
  ]
  node [
    id 62
    label "BW.pos_emb"
    cat "BW"
    dur_us 31.567
    step 4
  ]
  node [
    id 63
    label "BW.tok_emb"
    cat "BW"
    dur_us 47.39
    step 4
  ]
  node [
    id 64
    label "UPDATE.AdamW"
    cat "UPDATE"
    dur_us 16161.813
    step 4
  ]
  node [
    id 65
    label "Comm.bucket0"
    cat "Comm"
    dur_us 22726.063
    step 4
  ]
  node [
    id 66
    label "Comm.bucket1"
    cat "Comm"
    dur_us 14488.896
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
