graph [
  directed 1
  step 1
  node [
    id 0
    label "FW.tok_emb"
    cat "FW"
    dur_us 3034.979
    step 1
  ]
  node [
    id 1
    label "FW.pos_emb"
    cat "FW"
    dur_us 6783.346
    step 1
  ]
  node [
    id 2
    label "FW.blocks.0.ln1"
    cat "FW"
    dur_us 1597.669
    step 1
  ]
  node [
    id 3
    label "FW.blocks.0.attn.qkv"
    cat "FW"
    dur_us 106238.264
    step 1
  ]
  node [
    id 4
    label "FW.blocks.0.attn.proj"
    cat "FW"
    dur_us 36533.406
    step 1
  ]
  node [
    id 5
    label "FW.blocks.0.ln2"
    cat "FW"
    dur_us 1586.381
    step 1
  ]
  node [
    id 6
    label "FW.blocks.0.mlp.fc1"
    cat "FW"
    dur_us 130284.68
    step 1
  ]
  node [
    id 7
    label "FW.blocks.0.mlp.act"
    cat "FW"
    dur_us 4754.678
    step 1
  ]
  node [
    id 8
    label "FW.blocks.0.mlp.fc2"
    cat "FW"
    dur_us 143920.654
    step 1
  ]
  node [
    id 9
    label "FW.blocks.1.ln1"
    cat "FW"
    dur_us 1635.785
    step 1
  ]
  node [
    id 10
    label "FW.blocks.1.attn.qkv"
    cat "FW"
    dur_us 99975.381
    step 1
  ]
  node [
    id 11
    label "FW.blocks.1.attn.proj"
    cat "FW"
    dur_us 35749.544
    step 1
  ]
  node [
    id 12
    label "FW.blocks.1.ln2"
    cat "FW"
    dur_us 1571.931
    step 1
  ]
  node [
    id 13
    label "FW.blocks.1.mlp.fc1"
    cat "FW"
    dur_us 143182.48
    step 1
  ]
  node [
    id 14
    label "FW.blocks.1.mlp.act"
    cat "FW"
    dur_us 16421.593
    step 1
  ]
  node [
    id 15
    label "FW.blocks.1.mlp.fc2"
    cat "FW"
    dur_us 131371.071
    step 1
  ]
  node [
    id 16
    label "FW.blocks.2.ln1"
    cat "FW"
    dur_us 1353.827
    step 1
  ]
  node [
    id 17
    label "FW.blocks.2.attn.qkv"
    cat "FW"
    dur_us 87845.029
    step 1
  ]
  node [
    id 18
    label "FW.blocks.2.attn.proj"
    cat "FW"
    dur_us 65085.862
    step 1
  ]
  node [
    id 19
    label "FW.blocks.2.ln2"
    cat "FW"
    dur_us 4227.937
    step 1
  ]
  node [
    id 20
    label "FW.blocks.2.mlp.fc1"
    cat "FW"
    dur_us 178851.855
    step 1
  ]
  node [
    id 21
    label "FW.blocks.2.mlp.act"
    cat "FW"
    dur_us 29625.726
    step 1
  ]
  node [
    id 22
    label "FW.blocks.2.mlp.fc2"
    cat "FW"
    dur_us 214175.438
    step 1
  ]
  node [
    id 23
    label "FW.blocks.3.ln1"
    cat "FW"
    dur_us 8655.361
    step 1
  ]
  node [
    id 24
    label "FW.blocks.3.attn.qkv"
    cat "FW"
    dur_us 194198.014
    step 1
  ]
  node [
    id 25
    label "FW.blocks.3.attn.proj"
    cat "FW"
    dur_us 61746.221
    step 1
  ]
  node [
    id 26
    label "FW.blocks.3.ln2"
    cat "FW"
    dur_us 1551.49
    step 1
  ]
  node [
    id 27
    label "FW.blocks.3.mlp.fc1"
    cat "FW"
    dur_us 269736.98
    step 1
  ]
  node [
    id 28
    label "FW.blocks.3.mlp.act"
    cat "FW"
    dur_us 33671.463
    step 1
  ]
  node [
    id 29
    label "FW.blocks.3.mlp.fc2"
    cat "FW"
    dur_us 190770.542
    step 1
  ]
  node [
    id 30
    label "FW.blocks.4.ln1"
    cat "FW"
    dur_us 8168.929
    step 1
  ]
  node [
    id 31
    label "FW.blocks.4.attn.qkv"
    cat "FW"
    dur_us 158833.4
    step 1
  ]
  node [
    id 32
    label "FW.blocks.4.attn.proj"
    cat "FW"
    dur_us 51901.697
    step 1
  ]
  node [
    id 33
    label "FW.blocks.4.ln2"
    cat "FW"
    dur_us 7914.102
    step 1
  ]
  node [
    id 34
    label "FW.blocks.4.mlp.fc1"
    cat "FW"
    dur_us 207915.197
    step 1
  ]
  node [
    id 35
    label "FW.blocks.4.mlp.act"
    cat "FW"
    dur_us 33109.771
    step 1
  ]
  node [
    id 36
    label "FW.blocks.4.mlp.fc2"
    cat "FW"
    dur_us 158296.334
    step 1
  ]
  node [
    id 37
    label "FW.blocks.5.ln1"
    cat "FW"
    dur_us 35281.78
    step 1
  ]
  node [
    id 38
    label "FW.blocks.5.attn.qkv"
    cat "FW"
    dur_us 212916.902
    step 1
  ]
  node [
    id 39
    label "FW.blocks.5.attn.proj"
    cat "FW"
    dur_us 62198.752
    step 1
  ]
  node [
    id 40
    label "FW.blocks.5.ln2"
    cat "FW"
    dur_us 7474.15
    step 1
  ]
  node [
    id 41
    label "FW.blocks.5.mlp.fc1"
    cat "FW"
    dur_us 222571.123
    step 1
  ]
  node [
    id 42
    label "FW.blocks.5.mlp.act"
    cat "FW"
    dur_us 78758.78
    step 1
  ]
  node [
    id 43
    label "FW.blocks.5.mlp.fc2"
    cat "FW"
    dur_us 173011.768
    step 1
  ]
  node [
    id 44
    label "FW.blocks.6.ln1"
    cat "FW"
    dur_us 19582.318
    step 1
  ]
  node [
    id 45
    label "FW.blocks.6.attn.qkv"
    cat "FW"
    dur_us 180643.671
    step 1
  ]
  node [
    id 46
    label "FW.blocks.6.attn.proj"
    cat "FW"
    dur_us 37135.829
    step 1
  ]
  node [
    id 47
    label "FW.blocks.6.ln2"
    cat "FW"
    dur_us 3470.675
    step 1
  ]
  node [
    id 48
    label "FW.blocks.6.mlp.fc1"
    cat "FW"
    dur_us 134053.217
    step 1
  ]
  node [
    id 49
    label "FW.blocks.6.mlp.act"
    cat "FW"
    dur_us 67735.439
    step 1
  ]
  node [
    id 50
    label "FW.blocks.6.mlp.fc2"
    cat "FW"
    dur_us 114164.514
    step 1
  ]
  node [
    id 51
    label "FW.blocks.7.ln1"
    cat "FW"
    dur_us 16790.349
    step 1
  ]
  node [
    id 52
    label "FW.blocks.7.attn.qkv"
    cat "FW"
    dur_us 122156.442
    step 1
  ]
  node [
    id 53
    label "FW.blocks.7.attn.proj"
    cat "FW"
    dur_us 30171.706
    step 1
  ]
  node [
    id 54
    label "FW.blocks.7.ln2"
    cat "FW"
    dur_us 3450.806
    step 1
  ]
  node [
    id 55
    label "FW.blocks.7.mlp.fc1"
    cat "FW"
    dur_us 123215.832
    step 1
  ]
  node [
    id 56
    label "FW.blocks.7.mlp.act"
    cat "FW"
    dur_us 67896.378
    step 1
  ]
  node [
    id 57
    label "FW.blocks.7.mlp.fc2"
    cat "FW"
    dur_us 113429.074
    step 1
  ]
  node [
    id 58
    label "FW.blocks.8.ln1"
    cat "FW"
    dur_us 16826.233
    step 1
  ]
  node [
    id 59
    label "FW.blocks.8.attn.qkv"
    cat "FW"
    dur_us 127187.97
    step 1
  ]
  node [
    id 60
    label "FW.blocks.8.attn.proj"
    cat "FW"
    dur_us 33191.733
    step 1
  ]
  node [
    id 61
    label "FW.blocks.8.ln2"
    cat "FW"
    dur_us 4742.71
    step 1
  ]
  node [
    id 62
    label "FW.blocks.8.mlp.fc1"
    cat "FW"
    dur_us 171056.059
    step 1
  ]
  node [
    id 63
    label "FW.blocks.8.mlp.act"
    cat "FW"
    dur_us 77076.606
    step 1
  ]
  node [
    id 64
    label "FW.blocks.8.mlp.fc2"
    cat "FW"
    dur_us 173915.678
    step 1
  ]
  node [
    id 65
    label "FW.blocks.9.ln1"
    cat "FW"
    dur_us 17878.483
    step 1
  ]
  node [
    id 66
    label "FW.blocks.9.attn.qkv"
    cat "FW"
    dur_us 195225.147
    step 1
  ]
  node [
    id 67
    label "FW.blocks.9.attn.proj"
    cat "FW"
    dur_us 86959.446
    step 1
  ]
  node [
    id 68
    label "FW.blocks.9.ln2"
    cat "FW"
    dur_us 16995.113
    step 1
  ]
  node [
    id 69
    label "FW.blocks.9.mlp.fc1"
    cat "FW"
    dur_us 279231.675
    step 1
  ]
  node [
    id 70
    label "FW.blocks.9.mlp.act"
    cat "FW"
    dur_us 44429.531
    step 1
  ]
  node [
    id 71
    label "FW.blocks.9.mlp.fc2"
    cat "FW"
    dur_us 231284.47
    step 1
  ]
  node [
    id 72
    label "FW.blocks.10.ln1"
    cat "FW"
    dur_us 53257.848
    step 1
  ]
  node [
    id 73
    label "FW.blocks.10.attn.qkv"
    cat "FW"
    dur_us 253670.505
    step 1
  ]
  node [
    id 74
    label "FW.blocks.10.attn.proj"
    cat "FW"
    dur_us 73161.453
    step 1
  ]
  node [
    id 75
    label "FW.blocks.10.ln2"
    cat "FW"
    dur_us 7931.037
    step 1
  ]
  node [
    id 76
    label "FW.blocks.10.mlp.fc1"
    cat "FW"
    dur_us 227575.952
    step 1
  ]
  node [
    id 77
    label "FW.blocks.10.mlp.act"
    cat "FW"
    dur_us 20501.511
    step 1
  ]
  node [
    id 78
    label "FW.blocks.10.mlp.fc2"
    cat "FW"
    dur_us 149488.828
    step 1
  ]
  node [
    id 79
    label "FW.blocks.11.ln1"
    cat "FW"
    dur_us 21678.946
    step 1
  ]
  node [
    id 80
    label "FW.blocks.11.attn.qkv"
    cat "FW"
    dur_us 166454.878
    step 1
  ]
  node [
    id 81
    label "FW.blocks.11.attn.proj"
    cat "FW"
    dur_us 74213.132
    step 1
  ]
  node [
    id 82
    label "FW.blocks.11.ln2"
    cat "FW"
    dur_us 21237.612
    step 1
  ]
  node [
    id 83
    label "FW.blocks.11.mlp.fc1"
    cat "FW"
    dur_us 196957.995
    step 1
  ]
  node [
    id 84
    label "FW.blocks.11.mlp.act"
    cat "FW"
    dur_us 89539.637
    step 1
  ]
  node [
    id 85
    label "FW.blocks.11.mlp.fc2"
    cat "FW"
    dur_us 177349.708
    step 1
  ]
  node [
    id 86
    label "FW.ln_f"
    cat "FW"
    dur_us 21248.728
    step 1
  ]
  node [
    id 87
    label "FW.head"
    cat "FW"
    dur_us 535055.637
    step 1
  ]
  node [
    id 88
    label "BW.head"
    cat "BW"
    dur_us 749652.52
    step 1
  ]
  node [
    id 89
    label "BW.ln_f"
    cat "BW"
    dur_us 9213.267
    step 1
  ]
  node [
    id 90
    label "BW.blocks.11.mlp.fc2"
    cat "BW"
    dur_us 275492.432
    step 1
  ]
  node [
    id 91
    label "BW.blocks.11.mlp.act"
    cat "BW"
    dur_us 45128.858
    step 1
  ]
  node [
    id 92
    label "BW.blocks.11.mlp.fc1"
    cat "BW"
    dur_us 314506.646
    step 1
  ]
  node [
    id 93
    label "BW.blocks.11.ln2"
    cat "BW"
    dur_us 2540.176
    step 1
  ]
  node [
    id 94
    label "BW.blocks.11.attn.proj"
    cat "BW"
    dur_us 102082.995
    step 1
  ]
  node [
    id 95
    label "BW.blocks.11.attn.qkv"
    cat "BW"
    dur_us 330116.085
    step 1
  ]
  node [
    id 96
    label "BW.blocks.11.ln1"
    cat "BW"
    dur_us 21277.351
    step 1
  ]
  node [
    id 97
    label "BW.blocks.10.mlp.fc2"
    cat "BW"
    dur_us 423169.85
    step 1
  ]
  node [
    id 98
    label "BW.blocks.10.mlp.act"
    cat "BW"
    dur_us 47763.413
    step 1
  ]
  node [
    id 99
    label "BW.blocks.10.mlp.fc1"
    cat "BW"
    dur_us 403429.428
    step 1
  ]
  node [
    id 100
    label "BW.blocks.10.ln2"
    cat "BW"
    dur_us 4193.075
    step 1
  ]
  node [
    id 101
    label "BW.blocks.10.attn.proj"
    cat "BW"
    dur_us 120635.577
    step 1
  ]
  node [
    id 102
    label "BW.blocks.10.attn.qkv"
    cat "BW"
    dur_us 352378.156
    step 1
  ]
  node [
    id 103
    label "BW.blocks.10.ln1"
    cat "BW"
    dur_us 19091.541
    step 1
  ]
  node [
    id 104
    label "BW.blocks.9.mlp.fc2"
    cat "BW"
    dur_us 505062.21
    step 1
  ]
  node [
    id 105
    label "BW.blocks.9.mlp.act"
    cat "BW"
    dur_us 58170.32
    step 1
  ]
  node [
    id 106
    label "BW.blocks.9.mlp.fc1"
    cat "BW"
    dur_us 512652.893
    step 1
  ]
  node [
    id 107
    label "BW.blocks.9.ln2"
    cat "BW"
    dur_us 7972.277
    step 1
  ]
  node [
    id 108
    label "BW.blocks.9.attn.proj"
    cat "BW"
    dur_us 141193.582
    step 1
  ]
  node [
    id 109
    label "BW.blocks.9.attn.qkv"
    cat "BW"
    dur_us 359610.606
    step 1
  ]
  node [
    id 110
    label "BW.blocks.9.ln1"
    cat "BW"
    dur_us 26792.096
    step 1
  ]
  node [
    id 111
    label "BW.blocks.8.mlp.fc2"
    cat "BW"
    dur_us 451507.472
    step 1
  ]
  node [
    id 112
    label "BW.blocks.8.mlp.act"
    cat "BW"
    dur_us 49079.664
    step 1
  ]
  node [
    id 113
    label "BW.blocks.8.mlp.fc1"
    cat "BW"
    dur_us 456445.443
    step 1
  ]
  node [
    id 114
    label "BW.blocks.8.ln2"
    cat "BW"
    dur_us 7422.322
    step 1
  ]
  node [
    id 115
    label "BW.blocks.8.attn.proj"
    cat "BW"
    dur_us 108171.46
    step 1
  ]
  node [
    id 116
    label "BW.blocks.8.attn.qkv"
    cat "BW"
    dur_us 285891.227
    step 1
  ]
  node [
    id 117
    label "BW.blocks.8.ln1"
    cat "BW"
    dur_us 11572.585
    step 1
  ]
  node [
    id 118
    label "BW.blocks.7.mlp.fc2"
    cat "BW"
    dur_us 369948.35
    step 1
  ]
  node [
    id 119
    label "BW.blocks.7.mlp.act"
    cat "BW"
    dur_us 34941.507
    step 1
  ]
  node [
    id 120
    label "BW.blocks.7.mlp.fc1"
    cat "BW"
    dur_us 358629.573
    step 1
  ]
  node [
    id 121
    label "BW.blocks.7.ln2"
    cat "BW"
    dur_us 4482.264
    step 1
  ]
  node [
    id 122
    label "BW.blocks.7.attn.proj"
    cat "BW"
    dur_us 103331.345
    step 1
  ]
  node [
    id 123
    label "BW.blocks.7.attn.qkv"
    cat "BW"
    dur_us 298189.237
    step 1
  ]
  node [
    id 124
    label "BW.blocks.7.ln1"
    cat "BW"
    dur_us 7042.23
    step 1
  ]
  node [
    id 125
    label "BW.blocks.6.mlp.fc2"
    cat "BW"
    dur_us 440804.651
    step 1
  ]
  node [
    id 126
    label "BW.blocks.6.mlp.act"
    cat "BW"
    dur_us 50217.311
    step 1
  ]
  node [
    id 127
    label "BW.blocks.6.mlp.fc1"
    cat "BW"
    dur_us 394669.803
    step 1
  ]
  node [
    id 128
    label "BW.blocks.6.ln2"
    cat "BW"
    dur_us 3926.541
    step 1
  ]
  node [
    id 129
    label "BW.blocks.6.attn.proj"
    cat "BW"
    dur_us 110743.383
    step 1
  ]
  node [
    id 130
    label "BW.blocks.6.attn.qkv"
    cat "BW"
    dur_us 244811.838
    step 1
  ]
  node [
    id 131
    label "BW.blocks.6.ln1"
    cat "BW"
    dur_us 3539.687
    step 1
  ]
  node [
    id 132
    label "BW.blocks.5.mlp.fc2"
    cat "BW"
    dur_us 263903.393
    step 1
  ]
  node [
    id 133
    label "BW.blocks.5.mlp.act"
    cat "BW"
    dur_us 28930.806
    step 1
  ]
  node [
    id 134
    label "BW.blocks.5.mlp.fc1"
    cat "BW"
    dur_us 286281.035
    step 1
  ]
  node [
    id 135
    label "BW.blocks.5.ln2"
    cat "BW"
    dur_us 6047.635
    step 1
  ]
  node [
    id 136
    label "BW.blocks.5.attn.proj"
    cat "BW"
    dur_us 62790.89
    step 1
  ]
  node [
    id 137
    label "BW.blocks.5.attn.qkv"
    cat "BW"
    dur_us 198904.28
    step 1
  ]
  node [
    id 138
    label "BW.blocks.5.ln1"
    cat "BW"
    dur_us 4428.385
    step 1
  ]
  node [
    id 139
    label "BW.blocks.4.mlp.fc2"
    cat "BW"
    dur_us 268234.443
    step 1
  ]
  node [
    id 140
    label "BW.blocks.4.mlp.act"
    cat "BW"
    dur_us 14588.886
    step 1
  ]
  node [
    id 141
    label "BW.blocks.4.mlp.fc1"
    cat "BW"
    dur_us 266409.649
    step 1
  ]
  node [
    id 142
    label "BW.blocks.4.ln2"
    cat "BW"
    dur_us 3446.068
    step 1
  ]
  node [
    id 143
    label "BW.blocks.4.attn.proj"
    cat "BW"
    dur_us 65539.865
    step 1
  ]
  node [
    id 144
    label "BW.blocks.4.attn.qkv"
    cat "BW"
    dur_us 237660.362
    step 1
  ]
  node [
    id 145
    label "BW.blocks.4.ln1"
    cat "BW"
    dur_us 6577.52
    step 1
  ]
  node [
    id 146
    label "BW.blocks.3.mlp.fc2"
    cat "BW"
    dur_us 338110.091
    step 1
  ]
  node [
    id 147
    label "BW.blocks.3.mlp.act"
    cat "BW"
    dur_us 23412.826
    step 1
  ]
  node [
    id 148
    label "BW.blocks.3.mlp.fc1"
    cat "BW"
    dur_us 477288.564
    step 1
  ]
  node [
    id 149
    label "BW.blocks.3.ln2"
    cat "BW"
    dur_us 3582.19
    step 1
  ]
  node [
    id 150
    label "BW.blocks.3.attn.proj"
    cat "BW"
    dur_us 98711.448
    step 1
  ]
  node [
    id 151
    label "BW.blocks.3.attn.qkv"
    cat "BW"
    dur_us 304633.581
    step 1
  ]
  node [
    id 152
    label "BW.blocks.3.ln1"
    cat "BW"
    dur_us 10357.824
    step 1
  ]
  node [
    id 153
    label "BW.blocks.2.mlp.fc2"
    cat "BW"
    dur_us 395727.235
    step 1
  ]
  node [
    id 154
    label "BW.blocks.2.mlp.act"
    cat "BW"
    dur_us 23703.358
    step 1
  ]
  node [
    id 155
    label "BW.blocks.2.mlp.fc1"
    cat "BW"
    dur_us 392021.702
    step 1
  ]
  node [
    id 156
    label "BW.blocks.2.ln2"
    cat "BW"
    dur_us 23942.381
    step 1
  ]
  node [
    id 157
    label "BW.blocks.2.attn.proj"
    cat "BW"
    dur_us 136667.803
    step 1
  ]
  node [
    id 158
    label "BW.blocks.2.attn.qkv"
    cat "BW"
    dur_us 294567.915
    step 1
  ]
  node [
    id 159
    label "BW.blocks.2.ln1"
    cat "BW"
    dur_us 22492.823
    step 1
  ]
  node [
    id 160
    label "BW.blocks.1.mlp.fc2"
    cat "BW"
    dur_us 406823.584
    step 1
  ]
  node [
    id 161
    label "BW.blocks.1.mlp.act"
    cat "BW"
    dur_us 39296.021
    step 1
  ]
  node [
    id 162
    label "BW.blocks.1.mlp.fc1"
    cat "BW"
    dur_us 386191.58
    step 1
  ]
  node [
    id 163
    label "BW.blocks.1.ln2"
    cat "BW"
    dur_us 23033.434
    step 1
  ]
  node [
    id 164
    label "BW.blocks.1.attn.proj"
    cat "BW"
    dur_us 112688.37
    step 1
  ]
  node [
    id 165
    label "BW.blocks.1.attn.qkv"
    cat "BW"
    dur_us 282076.478
    step 1
  ]
  node [
    id 166
    label "BW.blocks.1.ln1"
    cat "BW"
    dur_us 22262.371
    step 1
  ]
  node [
    id 167
    label "BW.blocks.0.mlp.fc2"
    cat "BW"
    dur_us 378393.671
    step 1
  ]
  node [
    id 168
    label "BW.blocks.0.mlp.act"
    cat "BW"
    dur_us 43062.134
    step 1
  ]
  node [
    id 169
    label "BW.blocks.0.mlp.fc1"
    cat "BW"
    dur_us 361183.337
    step 1
  ]
  node [
    id 170
    label "BW.blocks.0.ln2"
    cat "BW"
    dur_us 17362.198
    step 1
  ]
  node [
    id 171
    label "BW.blocks.0.attn.proj"
    cat "BW"
    dur_us 115604.569
    step 1
  ]
  node [
    id 172
    label "BW.blocks.0.attn.qkv"
    cat "BW"
    dur_us 275668.218
    step 1
  ]
  node [
    id 173
    label "BW.blocks.0.ln1"
    cat "BW"
    dur_us 4425.941
    step 1
  ]
  node [
    id 174
    label "BW.pos_emb"
    cat "BW"
    dur_us 701.79
    step 1
  ]
  node [
    id 175
    label "BW.tok_emb"
    cat "BW"
    dur_us 2901.701
    step 1
  ]
  node [
    id 176
    label "UPDATE.AdamW"
    cat "UPDATE"
    dur_us 224722.247
    step 1
  ]
  node [
    id 177
    label "NEXT_STEP"
    cat "sink"
    dur_us 0.0
    step 1
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
]
