graph [
  directed 1
  step 5
  node [
    id 0
    label "FW.model.embed_tokens"
    cat "FW"
    dur_us 110.147
    step 5
  ]
  node [
    id 1
    label "FW.model"
    cat "FW"
    dur_us 40.289
    step 5
  ]
  node [
    id 2
    label "FW.model.rotary_emb"
    cat "FW"
    dur_us 371.465
    step 5
  ]
  node [
    id 3
    label "FW.model.layers.0.input_layernorm"
    cat "FW"
    dur_us 163.427
    step 5
  ]
  node [
    id 4
    label "FW.model.layers.0.self_attn.q_proj"
    cat "FW"
    dur_us 454.474
    step 5
  ]
  node [
    id 5
    label "FW.model.layers.0.self_attn.k_proj"
    cat "FW"
    dur_us 77.314
    step 5
  ]
  node [
    id 6
    label "FW.model.layers.0.self_attn.v_proj"
    cat "FW"
    dur_us 61.666
    step 5
  ]
  node [
    id 7
    label "FW.model.layers.0.self_attn"
    cat "FW"
    dur_us 618.061
    step 5
  ]
  node [
    id 8
    label "FW.model.layers.0.self_attn.o_proj"
    cat "FW"
    dur_us 142.275
    step 5
  ]
  node [
    id 9
    label "FW.model.layers.0"
    cat "FW"
    dur_us 18.305
    step 5
  ]
  node [
    id 10
    label "FW.model.layers.0.post_attention_layernorm"
    cat "FW"
    dur_us 126.787
    step 5
  ]
  node [
    id 11
    label "FW.model.layers.0.mlp.gate_proj"
    cat "FW"
    dur_us 109.154
    step 5
  ]
  node [
    id 12
    label "FW.model.layers.0.mlp.act_fn"
    cat "FW"
    dur_us 15.104
    step 5
  ]
  node [
    id 13
    label "FW.model.layers.0.mlp.up_proj"
    cat "FW"
    dur_us 112.035
    step 5
  ]
  node [
    id 14
    label "FW.model.layers.0.mlp"
    cat "FW"
    dur_us 23.393
    step 5
  ]
  node [
    id 15
    label "FW.model.layers.0.mlp.down_proj"
    cat "FW"
    dur_us 70.145
    step 5
  ]
  node [
    id 16
    label "FW.model.layers.0#1"
    cat "FW"
    dur_us 17.441
    step 5
  ]
  node [
    id 17
    label "FW.model.layers.1.input_layernorm"
    cat "FW"
    dur_us 117.474
    step 5
  ]
  node [
    id 18
    label "FW.model.layers.1.self_attn.q_proj"
    cat "FW"
    dur_us 71.393
    step 5
  ]
  node [
    id 19
    label "FW.model.layers.1.self_attn.k_proj"
    cat "FW"
    dur_us 65.889
    step 5
  ]
  node [
    id 20
    label "FW.model.layers.1.self_attn.v_proj"
    cat "FW"
    dur_us 68.834
    step 5
  ]
  node [
    id 21
    label "FW.model.layers.1.self_attn"
    cat "FW"
    dur_us 679.598
    step 5
  ]
  node [
    id 22
    label "FW.model.layers.1.self_attn.o_proj"
    cat "FW"
    dur_us 74.818
    step 5
  ]
  node [
    id 23
    label "FW.model.layers.1"
    cat "FW"
    dur_us 18.368
    step 5
  ]
  node [
    id 24
    label "FW.model.layers.1.post_attention_layernorm"
    cat "FW"
    dur_us 234.437
    step 5
  ]
  node [
    id 25
    label "FW.model.layers.1.mlp.gate_proj"
    cat "FW"
    dur_us 341.735
    step 5
  ]
  node [
    id 26
    label "FW.model.layers.1.mlp.act_fn"
    cat "FW"
    dur_us 14.528
    step 5
  ]
  node [
    id 27
    label "FW.model.layers.1.mlp.up_proj"
    cat "FW"
    dur_us 154.34
    step 5
  ]
  node [
    id 28
    label "FW.model.layers.1.mlp"
    cat "FW"
    dur_us 22.208
    step 5
  ]
  node [
    id 29
    label "FW.model.layers.1.mlp.down_proj"
    cat "FW"
    dur_us 112.162
    step 5
  ]
  node [
    id 30
    label "FW.model.layers.1#1"
    cat "FW"
    dur_us 17.312
    step 5
  ]
  node [
    id 31
    label "FW.model.layers.2.input_layernorm"
    cat "FW"
    dur_us 168.131
    step 5
  ]
  node [
    id 32
    label "FW.model.layers.2.self_attn.q_proj"
    cat "FW"
    dur_us 92.77
    step 5
  ]
  node [
    id 33
    label "FW.model.layers.2.self_attn.k_proj"
    cat "FW"
    dur_us 92.77
    step 5
  ]
  node [
    id 34
    label "FW.model.layers.2.self_attn.v_proj"
    cat "FW"
    dur_us 167.235
    step 5
  ]
  node [
    id 35
    label "FW.model.layers.2.self_attn"
    cat "FW"
    dur_us 567.98
    step 5
  ]
  node [
    id 36
    label "FW.model.layers.2.self_attn.o_proj"
    cat "FW"
    dur_us 73.378
    step 5
  ]
  node [
    id 37
    label "FW.model.layers.2"
    cat "FW"
    dur_us 18.497
    step 5
  ]
  node [
    id 38
    label "FW.model.layers.2.post_attention_layernorm"
    cat "FW"
    dur_us 199.652
    step 5
  ]
  node [
    id 39
    label "FW.model.layers.2.mlp.gate_proj"
    cat "FW"
    dur_us 120.611
    step 5
  ]
  node [
    id 40
    label "FW.model.layers.2.mlp.act_fn"
    cat "FW"
    dur_us 16.257
    step 5
  ]
  node [
    id 41
    label "FW.model.layers.2.mlp.up_proj"
    cat "FW"
    dur_us 94.658
    step 5
  ]
  node [
    id 42
    label "FW.model.layers.2.mlp"
    cat "FW"
    dur_us 22.785
    step 5
  ]
  node [
    id 43
    label "FW.model.layers.2.mlp.down_proj"
    cat "FW"
    dur_us 137.059
    step 5
  ]
  node [
    id 44
    label "FW.model.layers.2#1"
    cat "FW"
    dur_us 17.216
    step 5
  ]
  node [
    id 45
    label "FW.model.layers.3.input_layernorm"
    cat "FW"
    dur_us 117.378
    step 5
  ]
  node [
    id 46
    label "FW.model.layers.3.self_attn.q_proj"
    cat "FW"
    dur_us 74.177
    step 5
  ]
  node [
    id 47
    label "FW.model.layers.3.self_attn.k_proj"
    cat "FW"
    dur_us 78.785
    step 5
  ]
  node [
    id 48
    label "FW.model.layers.3.self_attn.v_proj"
    cat "FW"
    dur_us 62.37
    step 5
  ]
  node [
    id 49
    label "FW.model.layers.3.self_attn"
    cat "FW"
    dur_us 537.227
    step 5
  ]
  node [
    id 50
    label "FW.model.layers.3.self_attn.o_proj"
    cat "FW"
    dur_us 67.266
    step 5
  ]
  node [
    id 51
    label "FW.model.layers.3"
    cat "FW"
    dur_us 19.201
    step 5
  ]
  node [
    id 52
    label "FW.model.layers.3.post_attention_layernorm"
    cat "FW"
    dur_us 160.195
    step 5
  ]
  node [
    id 53
    label "FW.model.layers.3.mlp.gate_proj"
    cat "FW"
    dur_us 123.587
    step 5
  ]
  node [
    id 54
    label "FW.model.layers.3.mlp.act_fn"
    cat "FW"
    dur_us 16.001
    step 5
  ]
  node [
    id 55
    label "FW.model.layers.3.mlp.up_proj"
    cat "FW"
    dur_us 98.946
    step 5
  ]
  node [
    id 56
    label "FW.model.layers.3.mlp"
    cat "FW"
    dur_us 22.849
    step 5
  ]
  node [
    id 57
    label "FW.model.layers.3.mlp.down_proj"
    cat "FW"
    dur_us 71.426
    step 5
  ]
  node [
    id 58
    label "FW.model.layers.3#1"
    cat "FW"
    dur_us 17.12
    step 5
  ]
  node [
    id 59
    label "FW.model.layers.4.input_layernorm"
    cat "FW"
    dur_us 119.267
    step 5
  ]
  node [
    id 60
    label "FW.model.layers.4.self_attn.q_proj"
    cat "FW"
    dur_us 76.673
    step 5
  ]
  node [
    id 61
    label "FW.model.layers.4.self_attn.k_proj"
    cat "FW"
    dur_us 63.298
    step 5
  ]
  node [
    id 62
    label "FW.model.layers.4.self_attn.v_proj"
    cat "FW"
    dur_us 65.889
    step 5
  ]
  node [
    id 63
    label "FW.model.layers.4.self_attn"
    cat "FW"
    dur_us 636.173
    step 5
  ]
  node [
    id 64
    label "FW.model.layers.4.self_attn.o_proj"
    cat "FW"
    dur_us 78.21
    step 5
  ]
  node [
    id 65
    label "FW.model.layers.4"
    cat "FW"
    dur_us 18.72
    step 5
  ]
  node [
    id 66
    label "FW.model.layers.4.post_attention_layernorm"
    cat "FW"
    dur_us 134.274
    step 5
  ]
  node [
    id 67
    label "FW.model.layers.4.mlp.gate_proj"
    cat "FW"
    dur_us 108.675
    step 5
  ]
  node [
    id 68
    label "FW.model.layers.4.mlp.act_fn"
    cat "FW"
    dur_us 15.425
    step 5
  ]
  node [
    id 69
    label "FW.model.layers.4.mlp.up_proj"
    cat "FW"
    dur_us 93.058
    step 5
  ]
  node [
    id 70
    label "FW.model.layers.4.mlp"
    cat "FW"
    dur_us 22.752
    step 5
  ]
  node [
    id 71
    label "FW.model.layers.4.mlp.down_proj"
    cat "FW"
    dur_us 69.249
    step 5
  ]
  node [
    id 72
    label "FW.model.layers.4#1"
    cat "FW"
    dur_us 16.993
    step 5
  ]
  node [
    id 73
    label "FW.model.layers.5.input_layernorm"
    cat "FW"
    dur_us 117.859
    step 5
  ]
  node [
    id 74
    label "FW.model.layers.5.self_attn.q_proj"
    cat "FW"
    dur_us 74.434
    step 5
  ]
  node [
    id 75
    label "FW.model.layers.5.self_attn.k_proj"
    cat "FW"
    dur_us 81.985
    step 5
  ]
  node [
    id 76
    label "FW.model.layers.5.self_attn.v_proj"
    cat "FW"
    dur_us 120.034
    step 5
  ]
  node [
    id 77
    label "FW.model.layers.5.self_attn"
    cat "FW"
    dur_us 531.948
    step 5
  ]
  node [
    id 78
    label "FW.model.layers.5.self_attn.o_proj"
    cat "FW"
    dur_us 68.993
    step 5
  ]
  node [
    id 79
    label "FW.model.layers.5"
    cat "FW"
    dur_us 18.753
    step 5
  ]
  node [
    id 80
    label "FW.model.layers.5.post_attention_layernorm"
    cat "FW"
    dur_us 137.123
    step 5
  ]
  node [
    id 81
    label "FW.model.layers.5.mlp.gate_proj"
    cat "FW"
    dur_us 109.538
    step 5
  ]
  node [
    id 82
    label "FW.model.layers.5.mlp.act_fn"
    cat "FW"
    dur_us 15.168
    step 5
  ]
  node [
    id 83
    label "FW.model.layers.5.mlp.up_proj"
    cat "FW"
    dur_us 90.627
    step 5
  ]
  node [
    id 84
    label "FW.model.layers.5.mlp"
    cat "FW"
    dur_us 22.624
    step 5
  ]
  node [
    id 85
    label "FW.model.layers.5.mlp.down_proj"
    cat "FW"
    dur_us 68.77
    step 5
  ]
  node [
    id 86
    label "FW.model.layers.5#1"
    cat "FW"
    dur_us 17.28
    step 5
  ]
  node [
    id 87
    label "FW.model.layers.6.input_layernorm"
    cat "FW"
    dur_us 125.347
    step 5
  ]
  node [
    id 88
    label "FW.model.layers.6.self_attn.q_proj"
    cat "FW"
    dur_us 75.041
    step 5
  ]
  node [
    id 89
    label "FW.model.layers.6.self_attn.k_proj"
    cat "FW"
    dur_us 64.961
    step 5
  ]
  node [
    id 90
    label "FW.model.layers.6.self_attn.v_proj"
    cat "FW"
    dur_us 64.77
    step 5
  ]
  node [
    id 91
    label "FW.model.layers.6.self_attn"
    cat "FW"
    dur_us 544.684
    step 5
  ]
  node [
    id 92
    label "FW.model.layers.6.self_attn.o_proj"
    cat "FW"
    dur_us 68.673
    step 5
  ]
  node [
    id 93
    label "FW.model.layers.6"
    cat "FW"
    dur_us 18.304
    step 5
  ]
  node [
    id 94
    label "FW.model.layers.6.post_attention_layernorm"
    cat "FW"
    dur_us 148.803
    step 5
  ]
  node [
    id 95
    label "FW.model.layers.6.mlp.gate_proj"
    cat "FW"
    dur_us 105.986
    step 5
  ]
  node [
    id 96
    label "FW.model.layers.6.mlp.act_fn"
    cat "FW"
    dur_us 15.136
    step 5
  ]
  node [
    id 97
    label "FW.model.layers.6.mlp.up_proj"
    cat "FW"
    dur_us 93.666
    step 5
  ]
  node [
    id 98
    label "FW.model.layers.6.mlp"
    cat "FW"
    dur_us 22.784
    step 5
  ]
  node [
    id 99
    label "FW.model.layers.6.mlp.down_proj"
    cat "FW"
    dur_us 69.378
    step 5
  ]
  node [
    id 100
    label "FW.model.layers.6#1"
    cat "FW"
    dur_us 17.056
    step 5
  ]
  node [
    id 101
    label "FW.model.layers.7.input_layernorm"
    cat "FW"
    dur_us 121.314
    step 5
  ]
  node [
    id 102
    label "FW.model.layers.7.self_attn.q_proj"
    cat "FW"
    dur_us 74.978
    step 5
  ]
  node [
    id 103
    label "FW.model.layers.7.self_attn.k_proj"
    cat "FW"
    dur_us 63.969
    step 5
  ]
  node [
    id 104
    label "FW.model.layers.7.self_attn.v_proj"
    cat "FW"
    dur_us 80.482
    step 5
  ]
  node [
    id 105
    label "FW.model.layers.7.self_attn"
    cat "FW"
    dur_us 597.581
    step 5
  ]
  node [
    id 106
    label "FW.model.layers.7.self_attn.o_proj"
    cat "FW"
    dur_us 70.081
    step 5
  ]
  node [
    id 107
    label "FW.model.layers.7"
    cat "FW"
    dur_us 18.305
    step 5
  ]
  node [
    id 108
    label "FW.model.layers.7.post_attention_layernorm"
    cat "FW"
    dur_us 156.163
    step 5
  ]
  node [
    id 109
    label "FW.model.layers.7.mlp.gate_proj"
    cat "FW"
    dur_us 109.507
    step 5
  ]
  node [
    id 110
    label "FW.model.layers.7.mlp.act_fn"
    cat "FW"
    dur_us 14.976
    step 5
  ]
  node [
    id 111
    label "FW.model.layers.7.mlp.up_proj"
    cat "FW"
    dur_us 92.322
    step 5
  ]
  node [
    id 112
    label "FW.model.layers.7.mlp"
    cat "FW"
    dur_us 23.073
    step 5
  ]
  node [
    id 113
    label "FW.model.layers.7.mlp.down_proj"
    cat "FW"
    dur_us 70.593
    step 5
  ]
  node [
    id 114
    label "FW.model.layers.7#1"
    cat "FW"
    dur_us 17.089
    step 5
  ]
  node [
    id 115
    label "FW.model.layers.8.input_layernorm"
    cat "FW"
    dur_us 116.13
    step 5
  ]
  node [
    id 116
    label "FW.model.layers.8.self_attn.q_proj"
    cat "FW"
    dur_us 74.626
    step 5
  ]
  node [
    id 117
    label "FW.model.layers.8.self_attn.k_proj"
    cat "FW"
    dur_us 62.177
    step 5
  ]
  node [
    id 118
    label "FW.model.layers.8.self_attn.v_proj"
    cat "FW"
    dur_us 72.642
    step 5
  ]
  node [
    id 119
    label "FW.model.layers.8.self_attn"
    cat "FW"
    dur_us 506.891
    step 5
  ]
  node [
    id 120
    label "FW.model.layers.8.self_attn.o_proj"
    cat "FW"
    dur_us 93.218
    step 5
  ]
  node [
    id 121
    label "FW.model.layers.8"
    cat "FW"
    dur_us 18.496
    step 5
  ]
  node [
    id 122
    label "FW.model.layers.8.post_attention_layernorm"
    cat "FW"
    dur_us 126.466
    step 5
  ]
  node [
    id 123
    label "FW.model.layers.8.mlp.gate_proj"
    cat "FW"
    dur_us 126.723
    step 5
  ]
  node [
    id 124
    label "FW.model.layers.8.mlp.act_fn"
    cat "FW"
    dur_us 15.04
    step 5
  ]
  node [
    id 125
    label "FW.model.layers.8.mlp.up_proj"
    cat "FW"
    dur_us 90.466
    step 5
  ]
  node [
    id 126
    label "FW.model.layers.8.mlp"
    cat "FW"
    dur_us 22.913
    step 5
  ]
  node [
    id 127
    label "FW.model.layers.8.mlp.down_proj"
    cat "FW"
    dur_us 67.329
    step 5
  ]
  node [
    id 128
    label "FW.model.layers.8#1"
    cat "FW"
    dur_us 16.865
    step 5
  ]
  node [
    id 129
    label "FW.model.layers.9.input_layernorm"
    cat "FW"
    dur_us 116.898
    step 5
  ]
  node [
    id 130
    label "FW.model.layers.9.self_attn.q_proj"
    cat "FW"
    dur_us 77.09
    step 5
  ]
  node [
    id 131
    label "FW.model.layers.9.self_attn.k_proj"
    cat "FW"
    dur_us 62.306
    step 5
  ]
  node [
    id 132
    label "FW.model.layers.9.self_attn.v_proj"
    cat "FW"
    dur_us 60.738
    step 5
  ]
  node [
    id 133
    label "FW.model.layers.9.self_attn"
    cat "FW"
    dur_us 557.804
    step 5
  ]
  node [
    id 134
    label "FW.model.layers.9.self_attn.o_proj"
    cat "FW"
    dur_us 68.609
    step 5
  ]
  node [
    id 135
    label "FW.model.layers.9"
    cat "FW"
    dur_us 18.465
    step 5
  ]
  node [
    id 136
    label "FW.model.layers.9.post_attention_layernorm"
    cat "FW"
    dur_us 121.283
    step 5
  ]
  node [
    id 137
    label "FW.model.layers.9.mlp.gate_proj"
    cat "FW"
    dur_us 101.283
    step 5
  ]
  node [
    id 138
    label "FW.model.layers.9.mlp.act_fn"
    cat "FW"
    dur_us 14.688
    step 5
  ]
  node [
    id 139
    label "FW.model.layers.9.mlp.up_proj"
    cat "FW"
    dur_us 162.82
    step 5
  ]
  node [
    id 140
    label "FW.model.layers.9.mlp"
    cat "FW"
    dur_us 23.648
    step 5
  ]
  node [
    id 141
    label "FW.model.layers.9.mlp.down_proj"
    cat "FW"
    dur_us 70.305
    step 5
  ]
  node [
    id 142
    label "FW.model.layers.9#1"
    cat "FW"
    dur_us 17.473
    step 5
  ]
  node [
    id 143
    label "FW.model.layers.10.input_layernorm"
    cat "FW"
    dur_us 116.194
    step 5
  ]
  node [
    id 144
    label "FW.model.layers.10.self_attn.q_proj"
    cat "FW"
    dur_us 74.338
    step 5
  ]
  node [
    id 145
    label "FW.model.layers.10.self_attn.k_proj"
    cat "FW"
    dur_us 62.241
    step 5
  ]
  node [
    id 146
    label "FW.model.layers.10.self_attn.v_proj"
    cat "FW"
    dur_us 58.625
    step 5
  ]
  node [
    id 147
    label "FW.model.layers.10.self_attn"
    cat "FW"
    dur_us 552.267
    step 5
  ]
  node [
    id 148
    label "FW.model.layers.10.self_attn.o_proj"
    cat "FW"
    dur_us 69.442
    step 5
  ]
  node [
    id 149
    label "FW.model.layers.10"
    cat "FW"
    dur_us 18.465
    step 5
  ]
  node [
    id 150
    label "FW.model.layers.10.post_attention_layernorm"
    cat "FW"
    dur_us 146.275
    step 5
  ]
  node [
    id 151
    label "FW.model.layers.10.mlp.gate_proj"
    cat "FW"
    dur_us 103.171
    step 5
  ]
  node [
    id 152
    label "FW.model.layers.10.mlp.act_fn"
    cat "FW"
    dur_us 14.976
    step 5
  ]
  node [
    id 153
    label "FW.model.layers.10.mlp.up_proj"
    cat "FW"
    dur_us 120.355
    step 5
  ]
  node [
    id 154
    label "FW.model.layers.10.mlp"
    cat "FW"
    dur_us 23.648
    step 5
  ]
  node [
    id 155
    label "FW.model.layers.10.mlp.down_proj"
    cat "FW"
    dur_us 70.625
    step 5
  ]
  node [
    id 156
    label "FW.model.layers.10#1"
    cat "FW"
    dur_us 17.184
    step 5
  ]
  node [
    id 157
    label "FW.model.layers.11.input_layernorm"
    cat "FW"
    dur_us 115.651
    step 5
  ]
  node [
    id 158
    label "FW.model.layers.11.self_attn.q_proj"
    cat "FW"
    dur_us 72.738
    step 5
  ]
  node [
    id 159
    label "FW.model.layers.11.self_attn.k_proj"
    cat "FW"
    dur_us 61.313
    step 5
  ]
  node [
    id 160
    label "FW.model.layers.11.self_attn.v_proj"
    cat "FW"
    dur_us 62.657
    step 5
  ]
  node [
    id 161
    label "FW.model.layers.11.self_attn"
    cat "FW"
    dur_us 569.069
    step 5
  ]
  node [
    id 162
    label "FW.model.layers.11.self_attn.o_proj"
    cat "FW"
    dur_us 67.586
    step 5
  ]
  node [
    id 163
    label "FW.model.layers.11"
    cat "FW"
    dur_us 18.784
    step 5
  ]
  node [
    id 164
    label "FW.model.layers.11.post_attention_layernorm"
    cat "FW"
    dur_us 121.314
    step 5
  ]
  node [
    id 165
    label "FW.model.layers.11.mlp.gate_proj"
    cat "FW"
    dur_us 96.45
    step 5
  ]
  node [
    id 166
    label "FW.model.layers.11.mlp.act_fn"
    cat "FW"
    dur_us 15.009
    step 5
  ]
  node [
    id 167
    label "FW.model.layers.11.mlp.up_proj"
    cat "FW"
    dur_us 86.146
    step 5
  ]
  node [
    id 168
    label "FW.model.layers.11.mlp"
    cat "FW"
    dur_us 23.233
    step 5
  ]
  node [
    id 169
    label "FW.model.layers.11.mlp.down_proj"
    cat "FW"
    dur_us 82.946
    step 5
  ]
  node [
    id 170
    label "FW.model.layers.11#1"
    cat "FW"
    dur_us 17.184
    step 5
  ]
  node [
    id 171
    label "FW.model.norm"
    cat "FW"
    dur_us 115.01
    step 5
  ]
  node [
    id 172
    label "FW.lm_head"
    cat "FW"
    dur_us 447.273
    step 5
  ]
  node [
    id 173
    label "FW.LlamaForCausalLM"
    cat "FW"
    dur_us 1080.055
    step 5
  ]
  node [
    id 174
    label "BW.LlamaForCausalLM"
    cat "BW"
    dur_us 994.549
    step 5
  ]
  node [
    id 175
    label "BW.lm_head"
    cat "BW"
    dur_us 760.304
    step 5
  ]
  node [
    id 176
    label "BW.model.norm"
    cat "BW"
    dur_us 180.132
    step 5
  ]
  node [
    id 177
    label "BW.model.layers.11"
    cat "BW"
    dur_us 5.569
    step 5
  ]
  node [
    id 178
    label "BW.model.layers.11.mlp.down_proj"
    cat "BW"
    dur_us 90.081
    step 5
  ]
  node [
    id 179
    label "BW.model.layers.11.mlp"
    cat "BW"
    dur_us 52.162
    step 5
  ]
  node [
    id 180
    label "BW.model.layers.11.mlp.up_proj"
    cat "BW"
    dur_us 95.363
    step 5
  ]
  node [
    id 181
    label "BW.model.layers.11.mlp.act_fn"
    cat "BW"
    dur_us 26.241
    step 5
  ]
  node [
    id 182
    label "BW.model.layers.11.mlp.gate_proj"
    cat "BW"
    dur_us 108.419
    step 5
  ]
  node [
    id 183
    label "BW.model.layers.11.post_attention_layernorm"
    cat "BW"
    dur_us 313.895
    step 5
  ]
  node [
    id 184
    label "BW.model.layers.11#1"
    cat "BW"
    dur_us 5.728
    step 5
  ]
  node [
    id 185
    label "BW.model.layers.11.self_attn.o_proj"
    cat "BW"
    dur_us 148.515
    step 5
  ]
  node [
    id 186
    label "BW.model.layers.11.self_attn"
    cat "BW"
    dur_us 1220.762
    step 5
  ]
  node [
    id 187
    label "BW.model.layers.11.self_attn.v_proj"
    cat "BW"
    dur_us 194.5
    step 5
  ]
  node [
    id 188
    label "BW.model.layers.11.self_attn#1"
    cat "BW"
    dur_us 5.344
    step 5
  ]
  node [
    id 189
    label "BW.model.layers.11.self_attn.k_proj"
    cat "BW"
    dur_us 210.916
    step 5
  ]
  node [
    id 190
    label "BW.model.layers.11.self_attn#2"
    cat "BW"
    dur_us 14.912
    step 5
  ]
  node [
    id 191
    label "BW.model.layers.11.self_attn.q_proj"
    cat "BW"
    dur_us 185.989
    step 5
  ]
  node [
    id 192
    label "BW.model.layers.11.input_layernorm"
    cat "BW"
    dur_us 532.556
    step 5
  ]
  node [
    id 193
    label "BW.model.layers.10"
    cat "BW"
    dur_us 5.568
    step 5
  ]
  node [
    id 194
    label "BW.model.layers.10.mlp.down_proj"
    cat "BW"
    dur_us 142.307
    step 5
  ]
  node [
    id 195
    label "BW.model.layers.10.mlp"
    cat "BW"
    dur_us 51.201
    step 5
  ]
  node [
    id 196
    label "BW.model.layers.10.mlp.up_proj"
    cat "BW"
    dur_us 169.859
    step 5
  ]
  node [
    id 197
    label "BW.model.layers.10.mlp.act_fn"
    cat "BW"
    dur_us 27.009
    step 5
  ]
  node [
    id 198
    label "BW.model.layers.10.mlp.gate_proj"
    cat "BW"
    dur_us 183.908
    step 5
  ]
  node [
    id 199
    label "BW.model.layers.10.post_attention_layernorm"
    cat "BW"
    dur_us 470.027
    step 5
  ]
  node [
    id 200
    label "BW.model.layers.10#1"
    cat "BW"
    dur_us 5.824
    step 5
  ]
  node [
    id 201
    label "BW.model.layers.10.self_attn.o_proj"
    cat "BW"
    dur_us 123.491
    step 5
  ]
  node [
    id 202
    label "BW.model.layers.10.self_attn"
    cat "BW"
    dur_us 1145.848
    step 5
  ]
  node [
    id 203
    label "BW.model.layers.10.self_attn.v_proj"
    cat "BW"
    dur_us 178.595
    step 5
  ]
  node [
    id 204
    label "BW.model.layers.10.self_attn#1"
    cat "BW"
    dur_us 5.344
    step 5
  ]
  node [
    id 205
    label "BW.model.layers.10.self_attn.k_proj"
    cat "BW"
    dur_us 183.332
    step 5
  ]
  node [
    id 206
    label "BW.model.layers.10.self_attn#2"
    cat "BW"
    dur_us 15.264
    step 5
  ]
  node [
    id 207
    label "BW.model.layers.10.self_attn.q_proj"
    cat "BW"
    dur_us 184.291
    step 5
  ]
  node [
    id 208
    label "BW.model.layers.10.input_layernorm"
    cat "BW"
    dur_us 484.298
    step 5
  ]
  node [
    id 209
    label "BW.model.layers.9"
    cat "BW"
    dur_us 5.504
    step 5
  ]
  node [
    id 210
    label "BW.model.layers.9.mlp.down_proj"
    cat "BW"
    dur_us 144.515
    step 5
  ]
  node [
    id 211
    label "BW.model.layers.9.mlp"
    cat "BW"
    dur_us 50.017
    step 5
  ]
  node [
    id 212
    label "BW.model.layers.9.mlp.up_proj"
    cat "BW"
    dur_us 197.188
    step 5
  ]
  node [
    id 213
    label "BW.model.layers.9.mlp.act_fn"
    cat "BW"
    dur_us 25.953
    step 5
  ]
  node [
    id 214
    label "BW.model.layers.9.mlp.gate_proj"
    cat "BW"
    dur_us 202.34
    step 5
  ]
  node [
    id 215
    label "BW.model.layers.9.post_attention_layernorm"
    cat "BW"
    dur_us 452.49
    step 5
  ]
  node [
    id 216
    label "BW.model.layers.9#1"
    cat "BW"
    dur_us 5.504
    step 5
  ]
  node [
    id 217
    label "BW.model.layers.9.self_attn.o_proj"
    cat "BW"
    dur_us 128.547
    step 5
  ]
  node [
    id 218
    label "BW.model.layers.9.self_attn"
    cat "BW"
    dur_us 1112.023
    step 5
  ]
  node [
    id 219
    label "BW.model.layers.9.self_attn.v_proj"
    cat "BW"
    dur_us 221.317
    step 5
  ]
  node [
    id 220
    label "BW.model.layers.9.self_attn#1"
    cat "BW"
    dur_us 5.376
    step 5
  ]
  node [
    id 221
    label "BW.model.layers.9.self_attn.k_proj"
    cat "BW"
    dur_us 197.317
    step 5
  ]
  node [
    id 222
    label "BW.model.layers.9.self_attn#2"
    cat "BW"
    dur_us 14.88
    step 5
  ]
  node [
    id 223
    label "BW.model.layers.9.self_attn.q_proj"
    cat "BW"
    dur_us 170.276
    step 5
  ]
  node [
    id 224
    label "BW.model.layers.9.input_layernorm"
    cat "BW"
    dur_us 438.826
    step 5
  ]
  node [
    id 225
    label "BW.model.layers.8"
    cat "BW"
    dur_us 4.992
    step 5
  ]
  node [
    id 226
    label "BW.model.layers.8.mlp.down_proj"
    cat "BW"
    dur_us 140.034
    step 5
  ]
  node [
    id 227
    label "BW.model.layers.8.mlp"
    cat "BW"
    dur_us 50.529
    step 5
  ]
  node [
    id 228
    label "BW.model.layers.8.mlp.up_proj"
    cat "BW"
    dur_us 161.668
    step 5
  ]
  node [
    id 229
    label "BW.model.layers.8.mlp.act_fn"
    cat "BW"
    dur_us 25.824
    step 5
  ]
  node [
    id 230
    label "BW.model.layers.8.mlp.gate_proj"
    cat "BW"
    dur_us 199.812
    step 5
  ]
  node [
    id 231
    label "BW.model.layers.8.post_attention_layernorm"
    cat "BW"
    dur_us 472.746
    step 5
  ]
  node [
    id 232
    label "BW.model.layers.8#1"
    cat "BW"
    dur_us 5.44
    step 5
  ]
  node [
    id 233
    label "BW.model.layers.8.self_attn.o_proj"
    cat "BW"
    dur_us 124.131
    step 5
  ]
  node [
    id 234
    label "BW.model.layers.8.self_attn"
    cat "BW"
    dur_us 1323.421
    step 5
  ]
  node [
    id 235
    label "BW.model.layers.8.self_attn.v_proj"
    cat "BW"
    dur_us 179.14
    step 5
  ]
  node [
    id 236
    label "BW.model.layers.8.self_attn#1"
    cat "BW"
    dur_us 5.6
    step 5
  ]
  node [
    id 237
    label "BW.model.layers.8.self_attn.k_proj"
    cat "BW"
    dur_us 184.1
    step 5
  ]
  node [
    id 238
    label "BW.model.layers.8.self_attn#2"
    cat "BW"
    dur_us 14.945
    step 5
  ]
  node [
    id 239
    label "BW.model.layers.8.self_attn.q_proj"
    cat "BW"
    dur_us 202.148
    step 5
  ]
  node [
    id 240
    label "BW.model.layers.8.input_layernorm"
    cat "BW"
    dur_us 463.817
    step 5
  ]
  node [
    id 241
    label "BW.model.layers.7"
    cat "BW"
    dur_us 5.344
    step 5
  ]
  node [
    id 242
    label "BW.model.layers.7.mlp.down_proj"
    cat "BW"
    dur_us 143.843
    step 5
  ]
  node [
    id 243
    label "BW.model.layers.7.mlp"
    cat "BW"
    dur_us 50.561
    step 5
  ]
  node [
    id 244
    label "BW.model.layers.7.mlp.up_proj"
    cat "BW"
    dur_us 178.18
    step 5
  ]
  node [
    id 245
    label "BW.model.layers.7.mlp.act_fn"
    cat "BW"
    dur_us 27.456
    step 5
  ]
  node [
    id 246
    label "BW.model.layers.7.mlp.gate_proj"
    cat "BW"
    dur_us 187.428
    step 5
  ]
  node [
    id 247
    label "BW.model.layers.7.post_attention_layernorm"
    cat "BW"
    dur_us 455.466
    step 5
  ]
  node [
    id 248
    label "BW.model.layers.7#1"
    cat "BW"
    dur_us 5.057
    step 5
  ]
  node [
    id 249
    label "BW.model.layers.7.self_attn.o_proj"
    cat "BW"
    dur_us 118.883
    step 5
  ]
  node [
    id 250
    label "BW.model.layers.7.self_attn"
    cat "BW"
    dur_us 1227.386
    step 5
  ]
  node [
    id 251
    label "BW.model.layers.7.self_attn.v_proj"
    cat "BW"
    dur_us 158.819
    step 5
  ]
  node [
    id 252
    label "BW.model.layers.7.self_attn#1"
    cat "BW"
    dur_us 5.344
    step 5
  ]
  node [
    id 253
    label "BW.model.layers.7.self_attn.k_proj"
    cat "BW"
    dur_us 175.108
    step 5
  ]
  node [
    id 254
    label "BW.model.layers.7.self_attn#2"
    cat "BW"
    dur_us 15.2
    step 5
  ]
  node [
    id 255
    label "BW.model.layers.7.self_attn.q_proj"
    cat "BW"
    dur_us 173.443
    step 5
  ]
  node [
    id 256
    label "BW.model.layers.7.input_layernorm"
    cat "BW"
    dur_us 494.379
    step 5
  ]
  node [
    id 257
    label "BW.model.layers.6"
    cat "BW"
    dur_us 5.76
    step 5
  ]
  node [
    id 258
    label "BW.model.layers.6.mlp.down_proj"
    cat "BW"
    dur_us 137.955
    step 5
  ]
  node [
    id 259
    label "BW.model.layers.6.mlp"
    cat "BW"
    dur_us 50.049
    step 5
  ]
  node [
    id 260
    label "BW.model.layers.6.mlp.up_proj"
    cat "BW"
    dur_us 163.619
    step 5
  ]
  node [
    id 261
    label "BW.model.layers.6.mlp.act_fn"
    cat "BW"
    dur_us 26.465
    step 5
  ]
  node [
    id 262
    label "BW.model.layers.6.mlp.gate_proj"
    cat "BW"
    dur_us 179.62
    step 5
  ]
  node [
    id 263
    label "BW.model.layers.6.post_attention_layernorm"
    cat "BW"
    dur_us 448.265
    step 5
  ]
  node [
    id 264
    label "BW.model.layers.6#1"
    cat "BW"
    dur_us 5.216
    step 5
  ]
  node [
    id 265
    label "BW.model.layers.6.self_attn.o_proj"
    cat "BW"
    dur_us 188.452
    step 5
  ]
  node [
    id 266
    label "BW.model.layers.6.self_attn"
    cat "BW"
    dur_us 1111.48
    step 5
  ]
  node [
    id 267
    label "BW.model.layers.6.self_attn.v_proj"
    cat "BW"
    dur_us 162.691
    step 5
  ]
  node [
    id 268
    label "BW.model.layers.6.self_attn#1"
    cat "BW"
    dur_us 5.6
    step 5
  ]
  node [
    id 269
    label "BW.model.layers.6.self_attn.k_proj"
    cat "BW"
    dur_us 180.259
    step 5
  ]
  node [
    id 270
    label "BW.model.layers.6.self_attn#2"
    cat "BW"
    dur_us 15.296
    step 5
  ]
  node [
    id 271
    label "BW.model.layers.6.self_attn.q_proj"
    cat "BW"
    dur_us 174.02
    step 5
  ]
  node [
    id 272
    label "BW.model.layers.6.input_layernorm"
    cat "BW"
    dur_us 464.906
    step 5
  ]
  node [
    id 273
    label "BW.model.layers.5"
    cat "BW"
    dur_us 5.088
    step 5
  ]
  node [
    id 274
    label "BW.model.layers.5.mlp.down_proj"
    cat "BW"
    dur_us 135.139
    step 5
  ]
  node [
    id 275
    label "BW.model.layers.5.mlp"
    cat "BW"
    dur_us 50.273
    step 5
  ]
  node [
    id 276
    label "BW.model.layers.5.mlp.up_proj"
    cat "BW"
    dur_us 156.259
    step 5
  ]
  node [
    id 277
    label "BW.model.layers.5.mlp.act_fn"
    cat "BW"
    dur_us 26.913
    step 5
  ]
  node [
    id 278
    label "BW.model.layers.5.mlp.gate_proj"
    cat "BW"
    dur_us 175.94
    step 5
  ]
  node [
    id 279
    label "BW.model.layers.5.post_attention_layernorm"
    cat "BW"
    dur_us 488.171
    step 5
  ]
  node [
    id 280
    label "BW.model.layers.5#1"
    cat "BW"
    dur_us 5.376
    step 5
  ]
  node [
    id 281
    label "BW.model.layers.5.self_attn.o_proj"
    cat "BW"
    dur_us 152.739
    step 5
  ]
  node [
    id 282
    label "BW.model.layers.5.self_attn"
    cat "BW"
    dur_us 1065.015
    step 5
  ]
  node [
    id 283
    label "BW.model.layers.5.self_attn.v_proj"
    cat "BW"
    dur_us 154.595
    step 5
  ]
  node [
    id 284
    label "BW.model.layers.5.self_attn#1"
    cat "BW"
    dur_us 5.44
    step 5
  ]
  node [
    id 285
    label "BW.model.layers.5.self_attn.k_proj"
    cat "BW"
    dur_us 179.14
    step 5
  ]
  node [
    id 286
    label "BW.model.layers.5.self_attn#2"
    cat "BW"
    dur_us 14.88
    step 5
  ]
  node [
    id 287
    label "BW.model.layers.5.self_attn.q_proj"
    cat "BW"
    dur_us 143.395
    step 5
  ]
  node [
    id 288
    label "BW.model.layers.5.input_layernorm"
    cat "BW"
    dur_us 325.319
    step 5
  ]
  node [
    id 289
    label "BW.model.layers.4"
    cat "BW"
    dur_us 5.152
    step 5
  ]
  node [
    id 290
    label "BW.model.layers.4.mlp.down_proj"
    cat "BW"
    dur_us 97.186
    step 5
  ]
  node [
    id 291
    label "BW.model.layers.4.mlp"
    cat "BW"
    dur_us 51.457
    step 5
  ]
  node [
    id 292
    label "BW.model.layers.4.mlp.up_proj"
    cat "BW"
    dur_us 157.284
    step 5
  ]
  node [
    id 293
    label "BW.model.layers.4.mlp.act_fn"
    cat "BW"
    dur_us 26.624
    step 5
  ]
  node [
    id 294
    label "BW.model.layers.4.mlp.gate_proj"
    cat "BW"
    dur_us 145.859
    step 5
  ]
  node [
    id 295
    label "BW.model.layers.4.post_attention_layernorm"
    cat "BW"
    dur_us 292.903
    step 5
  ]
  node [
    id 296
    label "BW.model.layers.4#1"
    cat "BW"
    dur_us 5.408
    step 5
  ]
  node [
    id 297
    label "BW.model.layers.4.self_attn.o_proj"
    cat "BW"
    dur_us 77.89
    step 5
  ]
  node [
    id 298
    label "BW.model.layers.4.self_attn"
    cat "BW"
    dur_us 756.816
    step 5
  ]
  node [
    id 299
    label "BW.model.layers.4.self_attn.v_proj"
    cat "BW"
    dur_us 108.674
    step 5
  ]
  node [
    id 300
    label "BW.model.layers.4.self_attn#1"
    cat "BW"
    dur_us 5.312
    step 5
  ]
  node [
    id 301
    label "BW.model.layers.4.self_attn.k_proj"
    cat "BW"
    dur_us 118.019
    step 5
  ]
  node [
    id 302
    label "BW.model.layers.4.self_attn#2"
    cat "BW"
    dur_us 14.944
    step 5
  ]
  node [
    id 303
    label "BW.model.layers.4.self_attn.q_proj"
    cat "BW"
    dur_us 128.515
    step 5
  ]
  node [
    id 304
    label "BW.model.layers.4.input_layernorm"
    cat "BW"
    dur_us 311.879
    step 5
  ]
  node [
    id 305
    label "BW.model.layers.3"
    cat "BW"
    dur_us 5.248
    step 5
  ]
  node [
    id 306
    label "BW.model.layers.3.mlp.down_proj"
    cat "BW"
    dur_us 96.546
    step 5
  ]
  node [
    id 307
    label "BW.model.layers.3.mlp"
    cat "BW"
    dur_us 50.561
    step 5
  ]
  node [
    id 308
    label "BW.model.layers.3.mlp.up_proj"
    cat "BW"
    dur_us 113.986
    step 5
  ]
  node [
    id 309
    label "BW.model.layers.3.mlp.act_fn"
    cat "BW"
    dur_us 26.368
    step 5
  ]
  node [
    id 310
    label "BW.model.layers.3.mlp.gate_proj"
    cat "BW"
    dur_us 140.931
    step 5
  ]
  node [
    id 311
    label "BW.model.layers.3.post_attention_layernorm"
    cat "BW"
    dur_us 291.27
    step 5
  ]
  node [
    id 312
    label "BW.model.layers.3#1"
    cat "BW"
    dur_us 5.184
    step 5
  ]
  node [
    id 313
    label "BW.model.layers.3.self_attn.o_proj"
    cat "BW"
    dur_us 79.906
    step 5
  ]
  node [
    id 314
    label "BW.model.layers.3.self_attn"
    cat "BW"
    dur_us 762.513
    step 5
  ]
  node [
    id 315
    label "BW.model.layers.3.self_attn.v_proj"
    cat "BW"
    dur_us 113.89
    step 5
  ]
  node [
    id 316
    label "BW.model.layers.3.self_attn#1"
    cat "BW"
    dur_us 5.184
    step 5
  ]
  node [
    id 317
    label "BW.model.layers.3.self_attn.k_proj"
    cat "BW"
    dur_us 112.898
    step 5
  ]
  node [
    id 318
    label "BW.model.layers.3.self_attn#2"
    cat "BW"
    dur_us 15.008
    step 5
  ]
  node [
    id 319
    label "BW.model.layers.3.self_attn.q_proj"
    cat "BW"
    dur_us 188.804
    step 5
  ]
  node [
    id 320
    label "BW.model.layers.3.input_layernorm"
    cat "BW"
    dur_us 342.76
    step 5
  ]
  node [
    id 321
    label "BW.model.layers.2"
    cat "BW"
    dur_us 5.761
    step 5
  ]
  node [
    id 322
    label "BW.model.layers.2.mlp.down_proj"
    cat "BW"
    dur_us 98.37
    step 5
  ]
  node [
    id 323
    label "BW.model.layers.2.mlp"
    cat "BW"
    dur_us 49.89
    step 5
  ]
  node [
    id 324
    label "BW.model.layers.2.mlp.up_proj"
    cat "BW"
    dur_us 111.234
    step 5
  ]
  node [
    id 325
    label "BW.model.layers.2.mlp.act_fn"
    cat "BW"
    dur_us 26.144
    step 5
  ]
  node [
    id 326
    label "BW.model.layers.2.mlp.gate_proj"
    cat "BW"
    dur_us 121.667
    step 5
  ]
  node [
    id 327
    label "BW.model.layers.2.post_attention_layernorm"
    cat "BW"
    dur_us 299.238
    step 5
  ]
  node [
    id 328
    label "BW.model.layers.2#1"
    cat "BW"
    dur_us 5.408
    step 5
  ]
  node [
    id 329
    label "BW.model.layers.2.self_attn.o_proj"
    cat "BW"
    dur_us 78.37
    step 5
  ]
  node [
    id 330
    label "BW.model.layers.2.self_attn"
    cat "BW"
    dur_us 749.617
    step 5
  ]
  node [
    id 331
    label "BW.model.layers.2.self_attn.v_proj"
    cat "BW"
    dur_us 103.906
    step 5
  ]
  node [
    id 332
    label "BW.model.layers.2.self_attn#1"
    cat "BW"
    dur_us 5.44
    step 5
  ]
  node [
    id 333
    label "BW.model.layers.2.self_attn.k_proj"
    cat "BW"
    dur_us 166.915
    step 5
  ]
  node [
    id 334
    label "BW.model.layers.2.self_attn#2"
    cat "BW"
    dur_us 14.976
    step 5
  ]
  node [
    id 335
    label "BW.model.layers.2.self_attn.q_proj"
    cat "BW"
    dur_us 112.226
    step 5
  ]
  node [
    id 336
    label "BW.model.layers.2.input_layernorm"
    cat "BW"
    dur_us 325.702
    step 5
  ]
  node [
    id 337
    label "BW.model.layers.1"
    cat "BW"
    dur_us 6.112
    step 5
  ]
  node [
    id 338
    label "BW.model.layers.1.mlp.down_proj"
    cat "BW"
    dur_us 96.322
    step 5
  ]
  node [
    id 339
    label "BW.model.layers.1.mlp"
    cat "BW"
    dur_us 51.329
    step 5
  ]
  node [
    id 340
    label "BW.model.layers.1.mlp.up_proj"
    cat "BW"
    dur_us 112.354
    step 5
  ]
  node [
    id 341
    label "BW.model.layers.1.mlp.act_fn"
    cat "BW"
    dur_us 27.232
    step 5
  ]
  node [
    id 342
    label "BW.model.layers.1.mlp.gate_proj"
    cat "BW"
    dur_us 123.171
    step 5
  ]
  node [
    id 343
    label "BW.model.layers.1.post_attention_layernorm"
    cat "BW"
    dur_us 302.342
    step 5
  ]
  node [
    id 344
    label "BW.model.layers.1#1"
    cat "BW"
    dur_us 5.823
    step 5
  ]
  node [
    id 345
    label "BW.model.layers.1.self_attn.o_proj"
    cat "BW"
    dur_us 80.225
    step 5
  ]
  node [
    id 346
    label "BW.model.layers.1.self_attn"
    cat "BW"
    dur_us 1041.206
    step 5
  ]
  node [
    id 347
    label "BW.model.layers.1.self_attn.v_proj"
    cat "BW"
    dur_us 164.292
    step 5
  ]
  node [
    id 348
    label "BW.model.layers.1.self_attn#1"
    cat "BW"
    dur_us 5.313
    step 5
  ]
  node [
    id 349
    label "BW.model.layers.1.self_attn.k_proj"
    cat "BW"
    dur_us 190.948
    step 5
  ]
  node [
    id 350
    label "BW.model.layers.1.self_attn#2"
    cat "BW"
    dur_us 14.945
    step 5
  ]
  node [
    id 351
    label "BW.model.layers.1.self_attn.q_proj"
    cat "BW"
    dur_us 158.723
    step 5
  ]
  node [
    id 352
    label "BW.model.layers.1.input_layernorm"
    cat "BW"
    dur_us 398.761
    step 5
  ]
  node [
    id 353
    label "BW.model.layers.0"
    cat "BW"
    dur_us 6.08
    step 5
  ]
  node [
    id 354
    label "BW.model.layers.0.mlp.down_proj"
    cat "BW"
    dur_us 133.603
    step 5
  ]
  node [
    id 355
    label "BW.model.layers.0.mlp"
    cat "BW"
    dur_us 50.945
    step 5
  ]
  node [
    id 356
    label "BW.model.layers.0.mlp.up_proj"
    cat "BW"
    dur_us 112.803
    step 5
  ]
  node [
    id 357
    label "BW.model.layers.0.mlp.act_fn"
    cat "BW"
    dur_us 26.465
    step 5
  ]
  node [
    id 358
    label "BW.model.layers.0.mlp.gate_proj"
    cat "BW"
    dur_us 121.251
    step 5
  ]
  node [
    id 359
    label "BW.model.layers.0.post_attention_layernorm"
    cat "BW"
    dur_us 299.751
    step 5
  ]
  node [
    id 360
    label "BW.model.layers.0#1"
    cat "BW"
    dur_us 4.992
    step 5
  ]
  node [
    id 361
    label "BW.model.layers.0.self_attn.o_proj"
    cat "BW"
    dur_us 80.706
    step 5
  ]
  node [
    id 362
    label "BW.model.layers.0.self_attn"
    cat "BW"
    dur_us 805.809
    step 5
  ]
  node [
    id 363
    label "BW.model.layers.0.self_attn.v_proj"
    cat "BW"
    dur_us 134.723
    step 5
  ]
  node [
    id 364
    label "BW.model.layers.0.self_attn#1"
    cat "BW"
    dur_us 5.376
    step 5
  ]
  node [
    id 365
    label "BW.model.layers.0.self_attn.k_proj"
    cat "BW"
    dur_us 116.419
    step 5
  ]
  node [
    id 366
    label "BW.model.layers.0.self_attn#2"
    cat "BW"
    dur_us 14.849
    step 5
  ]
  node [
    id 367
    label "BW.model.layers.0.self_attn.q_proj"
    cat "BW"
    dur_us 113.73
    step 5
  ]
  node [
    id 368
    label "BW.model.layers.0.input_layernorm"
    cat "BW"
    dur_us 333.351
    step 5
  ]
  node [
    id 369
    label "BW.model.embed_tokens"
    cat "BW"
    dur_us 337.031
    step 5
  ]
  node [
    id 370
    label "UPDATE.AdamW"
    cat "UPDATE"
    dur_us 6019.265
    step 5
  ]
  node [
    id 371
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
  edge [
    source 232
    target 233
  ]
  edge [
    source 233
    target 234
  ]
  edge [
    source 234
    target 235
  ]
  edge [
    source 235
    target 236
  ]
  edge [
    source 236
    target 237
  ]
  edge [
    source 237
    target 238
  ]
  edge [
    source 238
    target 239
  ]
  edge [
    source 239
    target 240
  ]
  edge [
    source 240
    target 241
  ]
  edge [
    source 241
    target 242
  ]
  edge [
    source 242
    target 243
  ]
  edge [
    source 243
    target 244
  ]
  edge [
    source 244
    target 245
  ]
  edge [
    source 245
    target 246
  ]
  edge [
    source 246
    target 247
  ]
  edge [
    source 247
    target 248
  ]
  edge [
    source 248
    target 249
  ]
  edge [
    source 249
    target 250
  ]
  edge [
    source 250
    target 251
  ]
  edge [
    source 251
    target 252
  ]
  edge [
    source 252
    target 253
  ]
  edge [
    source 253
    target 254
  ]
  edge [
    source 254
    target 255
  ]
  edge [
    source 255
    target 256
  ]
  edge [
    source 256
    target 257
  ]
  edge [
    source 257
    target 258
  ]
  edge [
    source 258
    target 259
  ]
  edge [
    source 259
    target 260
  ]
  edge [
    source 260
    target 261
  ]
  edge [
    source 261
    target 262
  ]
  edge [
    source 262
    target 263
  ]
  edge [
    source 263
    target 264
  ]
  edge [
    source 264
    target 265
  ]
  edge [
    source 265
    target 266
  ]
  edge [
    source 266
    target 267
  ]
  edge [
    source 267
    target 268
  ]
  edge [
    source 268
    target 269
  ]
  edge [
    source 269
    target 270
  ]
  edge [
    source 270
    target 271
  ]
  edge [
    source 271
    target 272
  ]
  edge [
    source 272
    target 273
  ]
  edge [
    source 273
    target 274
  ]
  edge [
    source 274
    target 275
  ]
  edge [
    source 275
    target 276
  ]
  edge [
    source 276
    target 277
  ]
  edge [
    source 277
    target 278
  ]
  edge [
    source 278
    target 279
  ]
  edge [
    source 279
    target 280
  ]
  edge [
    source 280
    target 281
  ]
  edge [
    source 281
    target 282
  ]
  edge [
    source 282
    target 283
  ]
  edge [
    source 283
    target 284
  ]
  edge [
    source 284
    target 285
  ]
  edge [
    source 285
    target 286
  ]
  edge [
    source 286
    target 287
  ]
  edge [
    source 287
    target 288
  ]
  edge [
    source 288
    target 289
  ]
  edge [
    source 289
    target 290
  ]
  edge [
    source 290
    target 291
  ]
  edge [
    source 291
    target 292
  ]
  edge [
    source 292
    target 293
  ]
  edge [
    source 293
    target 294
  ]
  edge [
    source 294
    target 295
  ]
  edge [
    source 295
    target 296
  ]
  edge [
    source 296
    target 297
  ]
  edge [
    source 297
    target 298
  ]
  edge [
    source 298
    target 299
  ]
  edge [
    source 299
    target 300
  ]
  edge [
    source 300
    target 301
  ]
  edge [
    source 301
    target 302
  ]
  edge [
    source 302
    target 303
  ]
  edge [
    source 303
    target 304
  ]
  edge [
    source 304
    target 305
  ]
  edge [
    source 305
    target 306
  ]
  edge [
    source 306
    target 307
  ]
  edge [
    source 307
    target 308
  ]
  edge [
    source 308
    target 309
  ]
  edge [
    source 309
    target 310
  ]
  edge [
    source 310
    target 311
  ]
  edge [
    source 311
    target 312
  ]
  edge [
    source 312
    target 313
  ]
  edge [
    source 313
    target 314
  ]
  edge [
    source 314
    target 315
  ]
  edge [
    source 315
    target 316
  ]
  edge [
    source 316
    target 317
  ]
  edge [
    source 317
    target 318
  ]
  edge [
    source 318
    target 319
  ]
  edge [
    source 319
    target 320
  ]
  edge [
    source 320
    target 321
  ]
  edge [
    source 321
    target 322
  ]
  edge [
    source 322
    target 323
  ]
  edge [
    source 323
    target 324
  ]
  edge [
    source 324
    target 325
  ]
  edge [
    source 325
    target 326
  ]
  edge [
    source 326
    target 327
  ]
  edge [
    source 327
    target 328
  ]
  edge [
    source 328
    target 329
  ]
  edge [
    source 329
    target 330
  ]
  edge [
    source 330
    target 331
  ]
  edge [
    source 331
    target 332
  ]
  edge [
    source 332
    target 333
  ]
  edge [
    source 333
    target 334
  ]
  edge [
    source 334
    target 335
  ]
  edge [
    source 335
    target 336
  ]
  edge [
    source 336
    target 337
  ]
  edge [
    source 337
    target 338
  ]
  edge [
    source 338
    target 339
  ]
  edge [
    source 339
    target 340
  ]
  edge [
    source 340
    target 341
  ]
  edge [
    source 341
    target 342
  ]
  edge [
    source 342
    target 343
  ]
  edge [
    source 343
    target 344
  ]
  edge [
    source 344
    target 345
  ]
  edge [
    source 345
    target 346
  ]
  edge [
    source 346
    target 347
  ]
  edge [
    source 347
    target 348
  ]
  edge [
    source 348
    target 349
  ]
  edge [
    source 349
    target 350
  ]
  edge [
    source 350
    target 351
  ]
  edge [
    source 351
    target 352
  ]
  edge [
    source 352
    target 353
  ]
  edge [
    source 353
    target 354
  ]
  edge [
    source 354
    target 355
  ]
  edge [
    source 355
    target 356
  ]
  edge [
    source 356
    target 357
  ]
  edge [
    source 357
    target 358
  ]
  edge [
    source 358
    target 359
  ]
  edge [
    source 359
    target 360
  ]
  edge [
    source 360
    target 361
  ]
  edge [
    source 361
    target 362
  ]
  edge [
    source 362
    target 363
  ]
  edge [
    source 363
    target 364
  ]
  edge [
    source 364
    target 365
  ]
  edge [
    source 365
    target 366
  ]
  edge [
    source 366
    target 367
  ]
  edge [
    source 367
    target 368
  ]
  edge [
    source 368
    target 369
  ]
  edge [
    source 369
    target 370
  ]
  edge [
    source 370
    target 371
  ]
]
