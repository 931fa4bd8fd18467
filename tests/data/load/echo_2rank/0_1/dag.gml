graph [
  directed 1
  node [
    id 0
    label "FW.fc1"
    cat "FW"
    dur_us 50.0
    step 3
  ]
  node [
    id 1
    label "FW.act"
    cat "FW"
    dur_us 50.0
    step 3
  ]
  node [
    id 2
    label "FW.fc2"
    cat "FW"
    dur_us 50.0
    step 3
  ]
  node [
    id 3
    label "BW.fc2"
    cat "BW"
    dur_us 80.0
    step 3
  ]
  node [
    id 4
    label "BW.act"
    cat "BW"
    dur_us 80.0
    step 3
  ]
  node [
    id 5
    label "BW.fc1"
    cat "BW"
    dur_us 80.0
    step 3
  ]
  node [
    id 6
    label "Comm.bucket0"
    cat "Comm"
    dur_us 328.0
    step 3
  ]
  node [
    id 7
    label "UPDATE.SGD"
    cat "UPDATE"
    dur_us 40.0
    step 3
  ]
  node [
    id 8
    label "NEXT_STEP"
    cat "step"
    dur_us 0.0
    step 3
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
    source 5
    target 7
  ]
  edge [
    source 6
    target 7
  ]
  edge [
    source 7
    target 8
  ]
]
