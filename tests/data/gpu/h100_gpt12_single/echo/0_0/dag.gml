graph [
  directed 1
  step 5
  node [
    id 0
    label "FW.GPT"
    cat "FW"
    dur_us 23571.706
    step 5
  ]
  node [
    id 1
    label "FW.GPT#1"
    cat "FW"
    dur_us 0.928
    step 5
  ]
  node [
    id 2
    label "FW.tok_emb"
    cat "FW"
    dur_us 8.865
    step 5
  ]
  node [
    id 3
    label "FW.pos_emb"
    cat "FW"
    dur_us 3.008
    step 5
  ]
  node [
    id 4
    label "FW.GPT#2"
    cat "FW"
    dur_us 9.344
    step 5
  ]
  node [
    id 5
    label "FW.blocks.0.ln1"
    cat "FW"
    dur_us 13.377
    step 5
  ]
  node [
    id 6
    label "FW.blocks.0.attn.qkv"
    cat "FW"
    dur_us 388.168
    step 5
  ]
  node [
    id 7
    label "FW.blocks.0.attn"
    cat "FW"
    dur_us 572.94
    step 5
  ]
  node [
    id 8
    label "FW.blocks.0.attn.proj"
    cat "FW"
    dur_us 128.035
    step 5
  ]
  node [
    id 9
    label "FW.blocks.0"
    cat "FW"
    dur_us 11.36
    step 5
  ]
  node [
    id 10
    label "FW.blocks.0.ln2"
    cat "FW"
    dur_us 13.28
    step 5
  ]
  node [
    id 11
    label "FW.blocks.0.mlp.fc1"
    cat "FW"
    dur_us 399.144
    step 5
  ]
  node [
    id 12
    label "FW.blocks.0.mlp.act"
    cat "FW"
    dur_us 32.001
    step 5
  ]
  node [
    id 13
    label "FW.blocks.0.mlp.fc2"
    cat "FW"
    dur_us 498.154
    step 5
  ]
  node [
    id 14
    label "FW.blocks.0#1"
    cat "FW"
    dur_us 10.944
    step 5
  ]
  node [
    id 15
    label "FW.blocks.1.ln1"
    cat "FW"
    dur_us 13.152
    step 5
  ]
  node [
    id 16
    label "FW.blocks.1.attn.qkv"
    cat "FW"
    dur_us 384.392
    step 5
  ]
  node [
    id 17
    label "FW.blocks.1.attn"
    cat "FW"
    dur_us 572.684
    step 5
  ]
  node [
    id 18
    label "FW.blocks.1.attn.proj"
    cat "FW"
    dur_us 128.098
    step 5
  ]
  node [
    id 19
    label "FW.blocks.1"
    cat "FW"
    dur_us 11.489
    step 5
  ]
  node [
    id 20
    label "FW.blocks.1.ln2"
    cat "FW"
    dur_us 13.184
    step 5
  ]
  node [
    id 21
    label "FW.blocks.1.mlp.fc1"
    cat "FW"
    dur_us 399.881
    step 5
  ]
  node [
    id 22
    label "FW.blocks.1.mlp.act"
    cat "FW"
    dur_us 32.224
    step 5
  ]
  node [
    id 23
    label "FW.blocks.1.mlp.fc2"
    cat "FW"
    dur_us 498.795
    step 5
  ]
  node [
    id 24
    label "FW.blocks.1#1"
    cat "FW"
    dur_us 10.721
    step 5
  ]
  node [
    id 25
    label "FW.blocks.2.ln1"
    cat "FW"
    dur_us 13.121
    step 5
  ]
  node [
    id 26
    label "FW.blocks.2.attn.qkv"
    cat "FW"
    dur_us 384.584
    step 5
  ]
  node [
    id 27
    label "FW.blocks.2.attn"
    cat "FW"
    dur_us 585.613
    step 5
  ]
  node [
    id 28
    label "FW.blocks.2.attn.proj"
    cat "FW"
    dur_us 128.291
    step 5
  ]
  node [
    id 29
    label "FW.blocks.2"
    cat "FW"
    dur_us 11.264
    step 5
  ]
  node [
    id 30
    label "FW.blocks.2.ln2"
    cat "FW"
    dur_us 13.216
    step 5
  ]
  node [
    id 31
    label "FW.blocks.2.mlp.fc1"
    cat "FW"
    dur_us 399.785
    step 5
  ]
  node [
    id 32
    label "FW.blocks.2.mlp.act"
    cat "FW"
    dur_us 32.705
    step 5
  ]
  node [
    id 33
    label "FW.blocks.2.mlp.fc2"
    cat "FW"
    dur_us 498.763
    step 5
  ]
  node [
    id 34
    label "FW.blocks.2#1"
    cat "FW"
    dur_us 11.04
    step 5
  ]
  node [
    id 35
    label "FW.blocks.3.ln1"
    cat "FW"
    dur_us 13.216
    step 5
  ]
  node [
    id 36
    label "FW.blocks.3.attn.qkv"
    cat "FW"
    dur_us 383.688
    step 5
  ]
  node [
    id 37
    label "FW.blocks.3.attn"
    cat "FW"
    dur_us 574.637
    step 5
  ]
  node [
    id 38
    label "FW.blocks.3.attn.proj"
    cat "FW"
    dur_us 127.779
    step 5
  ]
  node [
    id 39
    label "FW.blocks.3"
    cat "FW"
    dur_us 11.584
    step 5
  ]
  node [
    id 40
    label "FW.blocks.3.ln2"
    cat "FW"
    dur_us 13.185
    step 5
  ]
  node [
    id 41
    label "FW.blocks.3.mlp.fc1"
    cat "FW"
    dur_us 399.336
    step 5
  ]
  node [
    id 42
    label "FW.blocks.3.mlp.act"
    cat "FW"
    dur_us 32.737
    step 5
  ]
  node [
    id 43
    label "FW.blocks.3.mlp.fc2"
    cat "FW"
    dur_us 498.347
    step 5
  ]
  node [
    id 44
    label "FW.blocks.3#1"
    cat "FW"
    dur_us 10.784
    step 5
  ]
  node [
    id 45
    label "FW.blocks.4.ln1"
    cat "FW"
    dur_us 13.28
    step 5
  ]
  node [
    id 46
    label "FW.blocks.4.attn.qkv"
    cat "FW"
    dur_us 384.84
    step 5
  ]
  node [
    id 47
    label "FW.blocks.4.attn"
    cat "FW"
    dur_us 576.46
    step 5
  ]
  node [
    id 48
    label "FW.blocks.4.attn.proj"
    cat "FW"
    dur_us 128.227
    step 5
  ]
  node [
    id 49
    label "FW.blocks.4"
    cat "FW"
    dur_us 11.392
    step 5
  ]
  node [
    id 50
    label "FW.blocks.4.ln2"
    cat "FW"
    dur_us 13.248
    step 5
  ]
  node [
    id 51
    label "FW.blocks.4.mlp.fc1"
    cat "FW"
    dur_us 399.72
    step 5
  ]
  node [
    id 52
    label "FW.blocks.4.mlp.act"
    cat "FW"
    dur_us 32.065
    step 5
  ]
  node [
    id 53
    label "FW.blocks.4.mlp.fc2"
    cat "FW"
    dur_us 497.675
    step 5
  ]
  node [
    id 54
    label "FW.blocks.4#1"
    cat "FW"
    dur_us 11.712
    step 5
  ]
  node [
    id 55
    label "FW.blocks.5.ln1"
    cat "FW"
    dur_us 13.632
    step 5
  ]
  node [
    id 56
    label "FW.blocks.5.attn.qkv"
    cat "FW"
    dur_us 384.296
    step 5
  ]
  node [
    id 57
    label "FW.blocks.5.attn"
    cat "FW"
    dur_us 573.613
    step 5
  ]
  node [
    id 58
    label "FW.blocks.5.attn.proj"
    cat "FW"
    dur_us 127.938
    step 5
  ]
  node [
    id 59
    label "FW.blocks.5"
    cat "FW"
    dur_us 11.328
    step 5
  ]
  node [
    id 60
    label "FW.blocks.5.ln2"
    cat "FW"
    dur_us 13.152
    step 5
  ]
  node [
    id 61
    label "FW.blocks.5.mlp.fc1"
    cat "FW"
    dur_us 399.112
    step 5
  ]
  node [
    id 62
    label "FW.blocks.5.mlp.act"
    cat "FW"
    dur_us 32.385
    step 5
  ]
  node [
    id 63
    label "FW.blocks.5.mlp.fc2"
    cat "FW"
    dur_us 497.898
    step 5
  ]
  node [
    id 64
    label "FW.blocks.5#1"
    cat "FW"
    dur_us 10.977
    step 5
  ]
  node [
    id 65
    label "FW.blocks.6.ln1"
    cat "FW"
    dur_us 13.281
    step 5
  ]
  node [
    id 66
    label "FW.blocks.6.attn.qkv"
    cat "FW"
    dur_us 384.04
    step 5
  ]
  node [
    id 67
    label "FW.blocks.6.attn"
    cat "FW"
    dur_us 577.004
    step 5
  ]
  node [
    id 68
    label "FW.blocks.6.attn.proj"
    cat "FW"
    dur_us 128.035
    step 5
  ]
  node [
    id 69
    label "FW.blocks.6"
    cat "FW"
    dur_us 12.065
    step 5
  ]
  node [
    id 70
    label "FW.blocks.6.ln2"
    cat "FW"
    dur_us 13.12
    step 5
  ]
  node [
    id 71
    label "FW.blocks.6.mlp.fc1"
    cat "FW"
    dur_us 399.049
    step 5
  ]
  node [
    id 72
    label "FW.blocks.6.mlp.act"
    cat "FW"
    dur_us 32.225
    step 5
  ]
  node [
    id 73
    label "FW.blocks.6.mlp.fc2"
    cat "FW"
    dur_us 497.035
    step 5
  ]
  node [
    id 74
    label "FW.blocks.6#1"
    cat "FW"
    dur_us 10.944
    step 5
  ]
  node [
    id 75
    label "FW.blocks.7.ln1"
    cat "FW"
    dur_us 13.6
    step 5
  ]
  node [
    id 76
    label "FW.blocks.7.attn.qkv"
    cat "FW"
    dur_us 383.912
    step 5
  ]
  node [
    id 77
    label "FW.blocks.7.attn"
    cat "FW"
    dur_us 578.252
    step 5
  ]
  node [
    id 78
    label "FW.blocks.7.attn.proj"
    cat "FW"
    dur_us 127.971
    step 5
  ]
  node [
    id 79
    label "FW.blocks.7"
    cat "FW"
    dur_us 11.488
    step 5
  ]
  node [
    id 80
    label "FW.blocks.7.ln2"
    cat "FW"
    dur_us 13.121
    step 5
  ]
  node [
    id 81
    label "FW.blocks.7.mlp.fc1"
    cat "FW"
    dur_us 399.464
    step 5
  ]
  node [
    id 82
    label "FW.blocks.7.mlp.act"
    cat "FW"
    dur_us 31.905
    step 5
  ]
  node [
    id 83
    label "FW.blocks.7.mlp.fc2"
    cat "FW"
    dur_us 497.931
    step 5
  ]
  node [
    id 84
    label "FW.blocks.7#1"
    cat "FW"
    dur_us 10.912
    step 5
  ]
  node [
    id 85
    label "FW.blocks.8.ln1"
    cat "FW"
    dur_us 13.472
    step 5
  ]
  node [
    id 86
    label "FW.blocks.8.attn.qkv"
    cat "FW"
    dur_us 383.209
    step 5
  ]
  node [
    id 87
    label "FW.blocks.8.attn"
    cat "FW"
    dur_us 583.116
    step 5
  ]
  node [
    id 88
    label "FW.blocks.8.attn.proj"
    cat "FW"
    dur_us 127.843
    step 5
  ]
  node [
    id 89
    label "FW.blocks.8"
    cat "FW"
    dur_us 11.264
    step 5
  ]
  node [
    id 90
    label "FW.blocks.8.ln2"
    cat "FW"
    dur_us 13.184
    step 5
  ]
  node [
    id 91
    label "FW.blocks.8.mlp.fc1"
    cat "FW"
    dur_us 398.633
    step 5
  ]
  node [
    id 92
    label "FW.blocks.8.mlp.act"
    cat "FW"
    dur_us 32.609
    step 5
  ]
  node [
    id 93
    label "FW.blocks.8.mlp.fc2"
    cat "FW"
    dur_us 497.13
    step 5
  ]
  node [
    id 94
    label "FW.blocks.8#1"
    cat "FW"
    dur_us 10.944
    step 5
  ]
  node [
    id 95
    label "FW.blocks.9.ln1"
    cat "FW"
    dur_us 13.248
    step 5
  ]
  node [
    id 96
    label "FW.blocks.9.attn.qkv"
    cat "FW"
    dur_us 383.944
    step 5
  ]
  node [
    id 97
    label "FW.blocks.9.attn"
    cat "FW"
    dur_us 575.213
    step 5
  ]
  node [
    id 98
    label "FW.blocks.9.attn.proj"
    cat "FW"
    dur_us 128.515
    step 5
  ]
  node [
    id 99
    label "FW.blocks.9"
    cat "FW"
    dur_us 11.712
    step 5
  ]
  node [
    id 100
    label "FW.blocks.9.ln2"
    cat "FW"
    dur_us 13.184
    step 5
  ]
  node [
    id 101
    label "FW.blocks.9.mlp.fc1"
    cat "FW"
    dur_us 400.137
    step 5
  ]
  node [
    id 102
    label "FW.blocks.9.mlp.act"
    cat "FW"
    dur_us 32.737
    step 5
  ]
  node [
    id 103
    label "FW.blocks.9.mlp.fc2"
    cat "FW"
    dur_us 500.779
    step 5
  ]
  node [
    id 104
    label "FW.blocks.9#1"
    cat "FW"
    dur_us 11.104
    step 5
  ]
  node [
    id 105
    label "FW.blocks.10.ln1"
    cat "FW"
    dur_us 13.472
    step 5
  ]
  node [
    id 106
    label "FW.blocks.10.attn.qkv"
    cat "FW"
    dur_us 385.256
    step 5
  ]
  node [
    id 107
    label "FW.blocks.10.attn"
    cat "FW"
    dur_us 584.013
    step 5
  ]
  node [
    id 108
    label "FW.blocks.10.attn.proj"
    cat "FW"
    dur_us 128.163
    step 5
  ]
  node [
    id 109
    label "FW.blocks.10"
    cat "FW"
    dur_us 11.297
    step 5
  ]
  node [
    id 110
    label "FW.blocks.10.ln2"
    cat "FW"
    dur_us 13.28
    step 5
  ]
  node [
    id 111
    label "FW.blocks.10.mlp.fc1"
    cat "FW"
    dur_us 399.209
    step 5
  ]
  node [
    id 112
    label "FW.blocks.10.mlp.act"
    cat "FW"
    dur_us 32.193
    step 5
  ]
  node [
    id 113
    label "FW.blocks.10.mlp.fc2"
    cat "FW"
    dur_us 498.122
    step 5
  ]
  node [
    id 114
    label "FW.blocks.10#1"
    cat "FW"
    dur_us 11.393
    step 5
  ]
  node [
    id 115
    label "FW.blocks.11.ln1"
    cat "FW"
    dur_us 13.44
    step 5
  ]
  node [
    id 116
    label "FW.blocks.11.attn.qkv"
    cat "FW"
    dur_us 383.88
    step 5
  ]
  node [
    id 117
    label "FW.blocks.11.attn"
    cat "FW"
    dur_us 575.021
    step 5
  ]
  node [
    id 118
    label "FW.blocks.11.attn.proj"
    cat "FW"
    dur_us 127.971
    step 5
  ]
  node [
    id 119
    label "FW.blocks.11"
    cat "FW"
    dur_us 11.329
    step 5
  ]
  node [
    id 120
    label "FW.blocks.11.ln2"
    cat "FW"
    dur_us 13.184
    step 5
  ]
  node [
    id 121
    label "FW.blocks.11.mlp.fc1"
    cat "FW"
    dur_us 399.176
    step 5
  ]
  node [
    id 122
    label "FW.blocks.11.mlp.act"
    cat "FW"
    dur_us 31.905
    step 5
  ]
  node [
    id 123
    label "FW.blocks.11.mlp.fc2"
    cat "FW"
    dur_us 497.419
    step 5
  ]
  node [
    id 124
    label "FW.blocks.11#1"
    cat "FW"
    dur_us 10.88
    step 5
  ]
  node [
    id 125
    label "FW.ln_f"
    cat "FW"
    dur_us 13.281
    step 5
  ]
  node [
    id 126
    label "FW.head"
    cat "FW"
    dur_us 1047.03
    step 5
  ]
  node [
    id 127
    label "FW.GPT#3"
    cat "FW"
    dur_us 157.859
    step 5
  ]
  node [
    id 128
    label "BW.GPT"
    cat "BW"
    dur_us 192.997
    step 5
  ]
  node [
    id 129
    label "BW.head"
    cat "BW"
    dur_us 2022.827
    step 5
  ]
  node [
    id 130
    label "BW.ln_f"
    cat "BW"
    dur_us 32.513
    step 5
  ]
  node [
    id 131
    label "BW.blocks.11.mlp.fc2"
    cat "BW"
    dur_us 841.394
    step 5
  ]
  node [
    id 132
    label "BW.blocks.11.mlp.act"
    cat "BW"
    dur_us 47.105
    step 5
  ]
  node [
    id 133
    label "BW.blocks.11.mlp.fc1"
    cat "BW"
    dur_us 867.122
    step 5
  ]
  node [
    id 134
    label "BW.blocks.11.ln2"
    cat "BW"
    dur_us 48.641
    step 5
  ]
  node [
    id 135
    label "BW.blocks.11.attn.proj"
    cat "BW"
    dur_us 247.941
    step 5
  ]
  node [
    id 136
    label "BW.blocks.11.attn"
    cat "BW"
    dur_us 1030.262
    step 5
  ]
  node [
    id 137
    label "BW.blocks.11.attn.qkv"
    cat "BW"
    dur_us 694.575
    step 5
  ]
  node [
    id 138
    label "BW.blocks.11.ln1"
    cat "BW"
    dur_us 48.385
    step 5
  ]
  node [
    id 139
    label "BW.blocks.10.mlp.fc2"
    cat "BW"
    dur_us 840.754
    step 5
  ]
  node [
    id 140
    label "BW.blocks.10.mlp.act"
    cat "BW"
    dur_us 46.785
    step 5
  ]
  node [
    id 141
    label "BW.blocks.10.mlp.fc1"
    cat "BW"
    dur_us 866.707
    step 5
  ]
  node [
    id 142
    label "BW.blocks.10.ln2"
    cat "BW"
    dur_us 45.921
    step 5
  ]
  node [
    id 143
    label "BW.blocks.10.attn.proj"
    cat "BW"
    dur_us 247.845
    step 5
  ]
  node [
    id 144
    label "BW.blocks.10.attn"
    cat "BW"
    dur_us 1028.982
    step 5
  ]
  node [
    id 145
    label "BW.blocks.10.attn.qkv"
    cat "BW"
    dur_us 695.439
    step 5
  ]
  node [
    id 146
    label "BW.blocks.10.ln1"
    cat "BW"
    dur_us 48.417
    step 5
  ]
  node [
    id 147
    label "BW.blocks.9.mlp.fc2"
    cat "BW"
    dur_us 841.683
    step 5
  ]
  node [
    id 148
    label "BW.blocks.9.mlp.act"
    cat "BW"
    dur_us 47.649
    step 5
  ]
  node [
    id 149
    label "BW.blocks.9.mlp.fc1"
    cat "BW"
    dur_us 864.338
    step 5
  ]
  node [
    id 150
    label "BW.blocks.9.ln2"
    cat "BW"
    dur_us 48.801
    step 5
  ]
  node [
    id 151
    label "BW.blocks.9.attn.proj"
    cat "BW"
    dur_us 248.581
    step 5
  ]
  node [
    id 152
    label "BW.blocks.9.attn"
    cat "BW"
    dur_us 1031.734
    step 5
  ]
  node [
    id 153
    label "BW.blocks.9.attn.qkv"
    cat "BW"
    dur_us 694.095
    step 5
  ]
  node [
    id 154
    label "BW.blocks.9.ln1"
    cat "BW"
    dur_us 46.113
    step 5
  ]
  node [
    id 155
    label "BW.blocks.8.mlp.fc2"
    cat "BW"
    dur_us 841.939
    step 5
  ]
  node [
    id 156
    label "BW.blocks.8.mlp.act"
    cat "BW"
    dur_us 47.777
    step 5
  ]
  node [
    id 157
    label "BW.blocks.8.mlp.fc1"
    cat "BW"
    dur_us 865.266
    step 5
  ]
  node [
    id 158
    label "BW.blocks.8.ln2"
    cat "BW"
    dur_us 48.481
    step 5
  ]
  node [
    id 159
    label "BW.blocks.8.attn.proj"
    cat "BW"
    dur_us 246.918
    step 5
  ]
  node [
    id 160
    label "BW.blocks.8.attn"
    cat "BW"
    dur_us 1030.774
    step 5
  ]
  node [
    id 161
    label "BW.blocks.8.attn.qkv"
    cat "BW"
    dur_us 695.791
    step 5
  ]
  node [
    id 162
    label "BW.blocks.8.ln1"
    cat "BW"
    dur_us 47.201
    step 5
  ]
  node [
    id 163
    label "BW.blocks.7.mlp.fc2"
    cat "BW"
    dur_us 841.554
    step 5
  ]
  node [
    id 164
    label "BW.blocks.7.mlp.act"
    cat "BW"
    dur_us 46.881
    step 5
  ]
  node [
    id 165
    label "BW.blocks.7.mlp.fc1"
    cat "BW"
    dur_us 867.155
    step 5
  ]
  node [
    id 166
    label "BW.blocks.7.ln2"
    cat "BW"
    dur_us 47.969
    step 5
  ]
  node [
    id 167
    label "BW.blocks.7.attn.proj"
    cat "BW"
    dur_us 248.389
    step 5
  ]
  node [
    id 168
    label "BW.blocks.7.attn"
    cat "BW"
    dur_us 1028.758
    step 5
  ]
  node [
    id 169
    label "BW.blocks.7.attn.qkv"
    cat "BW"
    dur_us 692.847
    step 5
  ]
  node [
    id 170
    label "BW.blocks.7.ln1"
    cat "BW"
    dur_us 50.113
    step 5
  ]
  node [
    id 171
    label "BW.blocks.6.mlp.fc2"
    cat "BW"
    dur_us 842.514
    step 5
  ]
  node [
    id 172
    label "BW.blocks.6.mlp.act"
    cat "BW"
    dur_us 46.912
    step 5
  ]
  node [
    id 173
    label "BW.blocks.6.mlp.fc1"
    cat "BW"
    dur_us 861.65
    step 5
  ]
  node [
    id 174
    label "BW.blocks.6.ln2"
    cat "BW"
    dur_us 47.361
    step 5
  ]
  node [
    id 175
    label "BW.blocks.6.attn.proj"
    cat "BW"
    dur_us 247.174
    step 5
  ]
  node [
    id 176
    label "BW.blocks.6.attn"
    cat "BW"
    dur_us 1028.693
    step 5
  ]
  node [
    id 177
    label "BW.blocks.6.attn.qkv"
    cat "BW"
    dur_us 693.775
    step 5
  ]
  node [
    id 178
    label "BW.blocks.6.ln1"
    cat "BW"
    dur_us 48.386
    step 5
  ]
  node [
    id 179
    label "BW.blocks.5.mlp.fc2"
    cat "BW"
    dur_us 839.313
    step 5
  ]
  node [
    id 180
    label "BW.blocks.5.mlp.act"
    cat "BW"
    dur_us 48.066
    step 5
  ]
  node [
    id 181
    label "BW.blocks.5.mlp.fc1"
    cat "BW"
    dur_us 863.282
    step 5
  ]
  node [
    id 182
    label "BW.blocks.5.ln2"
    cat "BW"
    dur_us 48.129
    step 5
  ]
  node [
    id 183
    label "BW.blocks.5.attn.proj"
    cat "BW"
    dur_us 248.325
    step 5
  ]
  node [
    id 184
    label "BW.blocks.5.attn"
    cat "BW"
    dur_us 1029.847
    step 5
  ]
  node [
    id 185
    label "BW.blocks.5.attn.qkv"
    cat "BW"
    dur_us 693.103
    step 5
  ]
  node [
    id 186
    label "BW.blocks.5.ln1"
    cat "BW"
    dur_us 46.496
    step 5
  ]
  node [
    id 187
    label "BW.blocks.4.mlp.fc2"
    cat "BW"
    dur_us 840.21
    step 5
  ]
  node [
    id 188
    label "BW.blocks.4.mlp.act"
    cat "BW"
    dur_us 47.393
    step 5
  ]
  node [
    id 189
    label "BW.blocks.4.mlp.fc1"
    cat "BW"
    dur_us 861.97
    step 5
  ]
  node [
    id 190
    label "BW.blocks.4.ln2"
    cat "BW"
    dur_us 48.13
    step 5
  ]
  node [
    id 191
    label "BW.blocks.4.attn.proj"
    cat "BW"
    dur_us 246.822
    step 5
  ]
  node [
    id 192
    label "BW.blocks.4.attn"
    cat "BW"
    dur_us 1028.182
    step 5
  ]
  node [
    id 193
    label "BW.blocks.4.attn.qkv"
    cat "BW"
    dur_us 693.647
    step 5
  ]
  node [
    id 194
    label "BW.blocks.4.ln1"
    cat "BW"
    dur_us 48.321
    step 5
  ]
  node [
    id 195
    label "BW.blocks.3.mlp.fc2"
    cat "BW"
    dur_us 840.402
    step 5
  ]
  node [
    id 196
    label "BW.blocks.3.mlp.act"
    cat "BW"
    dur_us 47.233
    step 5
  ]
  node [
    id 197
    label "BW.blocks.3.mlp.fc1"
    cat "BW"
    dur_us 863.25
    step 5
  ]
  node [
    id 198
    label "BW.blocks.3.ln2"
    cat "BW"
    dur_us 47.521
    step 5
  ]
  node [
    id 199
    label "BW.blocks.3.attn.proj"
    cat "BW"
    dur_us 247.27
    step 5
  ]
  node [
    id 200
    label "BW.blocks.3.attn"
    cat "BW"
    dur_us 1031.542
    step 5
  ]
  node [
    id 201
    label "BW.blocks.3.attn.qkv"
    cat "BW"
    dur_us 692.751
    step 5
  ]
  node [
    id 202
    label "BW.blocks.3.ln1"
    cat "BW"
    dur_us 48.865
    step 5
  ]
  node [
    id 203
    label "BW.blocks.2.mlp.fc2"
    cat "BW"
    dur_us 842.066
    step 5
  ]
  node [
    id 204
    label "BW.blocks.2.mlp.act"
    cat "BW"
    dur_us 46.753
    step 5
  ]
  node [
    id 205
    label "BW.blocks.2.mlp.fc1"
    cat "BW"
    dur_us 864.147
    step 5
  ]
  node [
    id 206
    label "BW.blocks.2.ln2"
    cat "BW"
    dur_us 45.985
    step 5
  ]
  node [
    id 207
    label "BW.blocks.2.attn.proj"
    cat "BW"
    dur_us 246.533
    step 5
  ]
  node [
    id 208
    label "BW.blocks.2.attn"
    cat "BW"
    dur_us 1030.838
    step 5
  ]
  node [
    id 209
    label "BW.blocks.2.attn.qkv"
    cat "BW"
    dur_us 692.975
    step 5
  ]
  node [
    id 210
    label "BW.blocks.2.ln1"
    cat "BW"
    dur_us 48.321
    step 5
  ]
  node [
    id 211
    label "BW.blocks.1.mlp.fc2"
    cat "BW"
    dur_us 847.315
    step 5
  ]
  node [
    id 212
    label "BW.blocks.1.mlp.act"
    cat "BW"
    dur_us 47.713
    step 5
  ]
  node [
    id 213
    label "BW.blocks.1.mlp.fc1"
    cat "BW"
    dur_us 864.115
    step 5
  ]
  node [
    id 214
    label "BW.blocks.1.ln2"
    cat "BW"
    dur_us 46.849
    step 5
  ]
  node [
    id 215
    label "BW.blocks.1.attn.proj"
    cat "BW"
    dur_us 248.613
    step 5
  ]
  node [
    id 216
    label "BW.blocks.1.attn"
    cat "BW"
    dur_us 1029.879
    step 5
  ]
  node [
    id 217
    label "BW.blocks.1.attn.qkv"
    cat "BW"
    dur_us 692.782
    step 5
  ]
  node [
    id 218
    label "BW.blocks.1.ln1"
    cat "BW"
    dur_us 45.921
    step 5
  ]
  node [
    id 219
    label "BW.blocks.0.mlp.fc2"
    cat "BW"
    dur_us 840.946
    step 5
  ]
  node [
    id 220
    label "BW.blocks.0.mlp.act"
    cat "BW"
    dur_us 47.232
    step 5
  ]
  node [
    id 221
    label "BW.blocks.0.mlp.fc1"
    cat "BW"
    dur_us 863.603
    step 5
  ]
  node [
    id 222
    label "BW.blocks.0.ln2"
    cat "BW"
    dur_us 48.897
    step 5
  ]
  node [
    id 223
    label "BW.blocks.0.attn.proj"
    cat "BW"
    dur_us 246.309
    step 5
  ]
  node [
    id 224
    label "BW.blocks.0.attn"
    cat "BW"
    dur_us 1030.487
    step 5
  ]
  node [
    id 225
    label "BW.blocks.0.attn.qkv"
    cat "BW"
    dur_us 693.775
    step 5
  ]
  node [
    id 226
    label "BW.blocks.0.ln1"
    cat "BW"
    dur_us 47.234
    step 5
  ]
  node [
    id 227
    label "BW.GPT#1"
    cat "BW"
    dur_us 5.312
    step 5
  ]
  node [
    id 228
    label "BW.pos_emb"
    cat "BW"
    dur_us 14.848
    step 5
  ]
  node [
    id 229
    label "BW.tok_emb"
    cat "BW"
    dur_us 175.748
    step 5
  ]
  node [
    id 230
    label "UPDATE.other"
    cat "UPDATE"
    dur_us 1.408
    step 5
  ]
  node [
    id 231
    label "UPDATE.AdamW"
    cat "UPDATE"
    dur_us 2926.335
    step 5
  ]
  node [
    id 232
    label "NEXT_STEP"
    cat "sink"
    dur_us 0.0
    step 5
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
    source 64
    target 65
  ]
  edge [
    source 65
    target 66
  ]
  edge [
    source 66
    target 67
  ]
  edge [
    source 67
    target 68
  ]
  edge [
    source 68
    target 69
  ]
  edge [
    source 69
    target 70
  ]
  edge [
    source 70
    target 71
  ]
  edge [
    source 71
    target 72
  ]
  edge [
    source 72
    target 73
  ]
  edge [
    source 73
    target 74
  ]
  edge [
    source 74
    target 75
  ]
  edge [
    source 75
    target 76
  ]
  edge [
    source 76
    target 77
  ]
  edge [
    source 77
    target 78
  ]
  edge [
    source 78
    target 79
  ]
  edge [
    source 79
    target 80
  ]
  edge [
    source 80
    target 81
  ]
  edge [
    source 81
    target 82
  ]
  edge [
    source 82
    target 83
  ]
  edge [
    source 83
    target 84
  ]
  edge [
    source 84
    target 85
  ]
  edge [
    source 85
    target 86
  ]
  edge [
    source 86
    target 87
  ]
  edge [
    source 87
    target 88
  ]
  edge [
    source 88
    target 89
  ]
  edge [
    source 89
    target 90
  ]
  edge [
    source 90
    target 91
  ]
  edge [
    source 91
    target 92
  ]
  edge [
    source 92
    target 93
  ]
  edge [
    source 93
    target 94
  ]
  edge [
    source 94
    target 95
  ]
  edge [
    source 95
    target 96
  ]
  edge [
    source 96
    target 97
  ]
  edge [
    source 97
    target 98
  ]
  edge [
    source 98
    target 99
  ]
  edge [
    source 99
    target 100
  ]
  edge [
    source 100
    target 101
  ]
  edge [
    source 101
    target 102
  ]
  edge [
    source 102
    target 103
  ]
  edge [
    source 103
    target 104
  ]
  edge [
    source 104
    target 105
  ]
  edge [
    source 105
    target 106
  ]
  edge [
    source 106
    target 107
  ]
  edge [
    source 107
    target 108
  ]
  edge [
    source 108
    target 109
  ]
  edge [
    source 109
    target 110
  ]
  edge [
    source 110
    target 111
  ]
  edge [
    source 111
    target 112
  ]
  edge [
    source 112
    target 113
  ]
  edge [
    source 113
    target 114
  ]
  edge [
    source 114
    target 115
  ]
  edge [
    source 115
    target 116
  ]
  edge [
    source 116
    target 117
  ]
  edge [
    source 117
    target 118
  ]
  edge [
    source 118
    target 119
  ]
  edge [
    source 119
    target 120
  ]
  edge [
    source 120
    target 121
  ]
  edge [
    source 121
    target 122
  ]
  edge [
    source 122
    target 123
  ]
  edge [
    source 123
    target 124
  ]
  edge [
    source 124
    target 125
  ]
  edge [
    source 125
    target 126
  ]
  edge [
    source 126
    target 127
  ]
  edge [
    source 127
    target 128
  ]
  edge [
    source 128
    target 129
  ]
  edge [
    source 129
    target 130
  ]
  edge [
    source 130
    target 131
  ]
  edge [
    source 131
    target 132
  ]
  edge [
    source 132
    target 133
  ]
  edge [
    source 133
    target 134
  ]
  edge [
    source 134
    target 135
  ]
  edge [
    source 135
    target 136
  ]
  edge [
    source 136
    target 137
  ]
  edge [
    source 137
    target 138
  ]
  edge [
    source 138
    target 139
  ]
  edge [
    source 139
    target 140
  ]
  edge [
    source 140
    target 141
  ]
  edge [
    source 141
    target 142
  ]
  edge [
    source 142
    target 143
  ]
  edge [
    source 143
    target 144
  ]
  edge [
    source 144
    target 145
  ]
  edge [
    source 145
    target 146
  ]
  edge [
    source 146
    target 147
  ]
  edge [
    source 147
    target 148
  ]
  edge [
    source 148
    target 149
  ]
  edge [
    source 149
    target 150
  ]
  edge [
    source 150
    target 151
  ]
  edge [
    source 151
    target 152
  ]
  edge [
    source 152
    target 153
  ]
  edge [
    source 153
    target 154
  ]
  edge [
    source 154
    target 155
  ]
  edge [
    source 155
    target 156
  ]
  edge [
    source 156
    target 157
  ]
  edge [
    source 157
    target 158
  ]
  edge [
    source 158
    target 159
  ]
  edge [
    source 159
    target 160
  ]
  edge [
    source 160
    target 161
  ]
  edge [
    source 161
    target 162
  ]
  edge [
    source 162
    target 163
  ]
  edge [
    source 163
    target 164
  ]
  edge [
    source 164
    target 165
  ]
  edge [
    source 165
    target 166
  ]
  edge [
    source 166
    target 167
  ]
  edge [
    source 167
    target 168
  ]
  edge [
    source 168
    target 169
  ]
  edge [
    source 169
    target 170
  ]
  edge [
    source 170
    target 171
  ]
  edge [
    source 171
    target 172
  ]
  edge [
    source 172
    target 173
  ]
  edge [
    source 173
    target 174
  ]
  edge [
    source 174
    target 175
  ]
  edge [
    source 175
    target 176
  ]
  edge [
    source 176
    target 177
  ]
  edge [
    source 177
    target 178
  ]
  edge [
    source 178
    target 179
  ]
  edge [
    source 179
    target 180
  ]
  edge [
    source 180
    target 181
  ]
  edge [
    source 181
    target 182
  ]
  edge [
    source 182
    target 183
  ]
  edge [
    source 183
    target 184
  ]
  edge [
    source 184
    target 185
  ]
  edge [
    source 185
    target 186
  ]
  edge [
    source 186
    target 187
  ]
  edge [
    source 187
    target 188
  ]
  edge [
    source 188
    target 189
  ]
  edge [
    source 189
    target 190
  ]
  edge [
    source 190
    target 191
  ]
  edge [
    source 191
    target 192
  ]
  edge [
    source 192
    target 193
  ]
  edge [
    source 193
    target 194
  ]
  edge [
    source 194
    target 195
  ]
  edge [
    source 195
    target 196
  ]
  edge [
    source 196
    target 197
  ]
  edge [
    source 197
    target 198
  ]
  edge [
    source 198
    target 199
  ]
  edge [
    source 199
    target 200
  ]
  edge [
    source 200
    target 201
  ]
  edge [
    source 201
    target 202
  ]
  edge [
    source 202
    target 203
  ]
  edge [
    source 203
    target 204
  ]
  edge [
    source 204
    target 205
  ]
  edge [
    source 205
    target 206
  ]
  edge [
    source 206
    target 207
  ]
  edge [
    source 207
    target 208
  ]
  edge [
    source 208
    target 209
  ]
  edge [
    source 209
    target 210
  ]
  edge [
    source 210
    target 211
  ]
  edge [
    source 211
    target 212
  ]
  edge [
    source 212
    target 213
  ]
  edge [
    source 213
    target 214
  ]
  edge [
    source 214
    target 215
  ]
  edge [
    source 215
    target 216
  ]
  edge [
    source 216
    target 217
  ]
  edge [
    source 217
    target 218
  ]
  edge [
    source 218
    target 219
  ]
  edge [
    source 219
    target 220
  ]
  edge [
    source 220
    target 221
  ]
  edge [
    source 221
    target 222
  ]
  edge [
    source 222
    target 223
  ]
  edge [
    source 223
    target 224
  ]
  edge [
    source 224
    target 225
  ]
  edge [
    source 225
    target 226
  ]
  edge [
    source 226
    target 227
  ]
  edge [
    source 227
    target 228
  ]
  edge [
    source 228
    target 229
  ]
  edge [
    source 229
    target 230
  ]
  edge [
    source 230
    target 231
  ]
  edge [
    source 231
    target 232
  ]
]
