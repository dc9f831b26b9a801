module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<512x512xf32>, %arg1: tensor<512x64xf32>) -> (tensor<512x64xf32> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<512x64xf32>
    %1 = stablehlo.multiply %arg1, %0 : tensor<512x64xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<512x64xf32>
    %3 = stablehlo.reshape %arg0 : (tensor<512x512xf32>) -> tensor<4x128x512xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<4x128x64xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %5:4 = stablehlo.while(%iterArg = %3, %iterArg_2 = %2, %iterArg_3 = %c, %iterArg_4 = %4) : tensor<4x128x512xf32>, tensor<512x64xf32>, tensor<i32>, tensor<4x128x64xf32>
    cond {
      %c_5 = stablehlo.constant dense<4> : tensor<i32>
      %8 = stablehlo.compare LT, %iterArg_3, %c_5, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %8 : tensor<i1>
    } do {
      %8 = func.call @dynamic_index_in_dim(%iterArg, %iterArg_3) : (tensor<4x128x512xf32>, tensor<i32>) -> tensor<128x512xf32>
      %9 = stablehlo.reshape %8 : (tensor<128x512xf32>) -> tensor<1x128x512xf32>
      %10 = stablehlo.reshape %iterArg_2 : (tensor<512x64xf32>) -> tensor<1x512x64xf32>
      %11 = stablehlo.abs %9 : tensor<1x128x512xf32>
      %cst_5 = stablehlo.constant dense<0xFF800000> : tensor<f32>
      %12 = stablehlo.reduce(%11 init: %cst_5) applies stablehlo.maximum across dimensions = [0, 1, 2] : (tensor<1x128x512xf32>, tensor<f32>) -> tensor<f32>
      %13 = stablehlo.abs %10 : tensor<1x512x64xf32>
      %cst_6 = stablehlo.constant dense<0xFF800000> : tensor<f32>
      %14 = stablehlo.reduce(%13 init: %cst_6) applies stablehlo.maximum across dimensions = [0, 1, 2] : (tensor<1x512x64xf32>, tensor<f32>) -> tensor<f32>
      %15 = stablehlo.multiply %12, %14 : tensor<f32>
      %cst_7 = stablehlo.constant dense<5.120000e+02> : tensor<f32>
      %16 = stablehlo.multiply %15, %cst_7 : tensor<f32>
      %cst_8 = stablehlo.constant dense<1.2676506E+30> : tensor<f32>
      %17 = stablehlo.compare LT, %16, %cst_8, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %18 = stablehlo.convert %17 : (tensor<i1>) -> tensor<i32>
      %c_9 = stablehlo.constant dense<0> : tensor<i32>
      %c_10 = stablehlo.constant dense<1> : tensor<i32>
      %19 = stablehlo.clamp %c_9, %18, %c_10 : tensor<i32>
      %20 = "stablehlo.case"(%19) ({
        %25 = stablehlo.is_finite %9 : (tensor<1x128x512xf32>) -> tensor<1x128x512xi1>
        %26 = stablehlo.is_finite %10 : (tensor<1x512x64xf32>) -> tensor<1x512x64xi1>
        %cst_12 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
        %27 = func.call @_where(%25, %9, %cst_12) : (tensor<1x128x512xi1>, tensor<1x128x512xf32>, tensor<f32>) -> tensor<1x128x512xf32>
        %cst_13 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
        %28 = func.call @_where_0(%26, %10, %cst_13) : (tensor<1x512x64xi1>, tensor<1x512x64xf32>, tensor<f32>) -> tensor<1x512x64xf32>
        %29 = stablehlo.reduce_precision %27, format = e8m7 : tensor<1x128x512xf32>
        %30 = func.call @isinf(%29) : (tensor<1x128x512xf32>) -> tensor<1x128x512xi1>
        %31 = func.call @isinf(%27) : (tensor<1x128x512xf32>) -> tensor<1x128x512xi1>
        %32 = stablehlo.not %31 : tensor<1x128x512xi1>
        %33 = stablehlo.and %30, %32 : tensor<1x128x512xi1>
        %34 = stablehlo.bitcast_convert %27 : (tensor<1x128x512xf32>) -> tensor<1x128x512xui32>
        %c_14 = stablehlo.constant dense<4294901760> : tensor<ui32>
        %35 = stablehlo.broadcast_in_dim %c_14, dims = [] : (tensor<ui32>) -> tensor<1x128x512xui32>
        %36 = stablehlo.and %34, %35 : tensor<1x128x512xui32>
        %37 = stablehlo.bitcast_convert %36 : (tensor<1x128x512xui32>) -> tensor<1x128x512xf32>
        %38 = func.call @_where_1(%33, %37, %29) : (tensor<1x128x512xi1>, tensor<1x128x512xf32>, tensor<1x128x512xf32>) -> tensor<1x128x512xf32>
        %39 = stablehlo.subtract %27, %38 : tensor<1x128x512xf32>
        %cst_15 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
        %40 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<f32>) -> tensor<1x128x512xf32>
        %41 = stablehlo.multiply %39, %40 : tensor<1x128x512xf32>
        %42 = stablehlo.reduce_precision %41, format = e8m7 : tensor<1x128x512xf32>
        %43 = func.call @isinf(%42) : (tensor<1x128x512xf32>) -> tensor<1x128x512xi1>
        %44 = func.call @isinf(%41) : (tensor<1x128x512xf32>) -> tensor<1x128x512xi1>
        %45 = stablehlo.not %44 : tensor<1x128x512xi1>
        %46 = stablehlo.and %43, %45 : tensor<1x128x512xi1>
        %47 = stablehlo.bitcast_convert %41 : (tensor<1x128x512xf32>) -> tensor<1x128x512xui32>
        %c_16 = stablehlo.constant dense<4294901760> : tensor<ui32>
        %48 = stablehlo.broadcast_in_dim %c_16, dims = [] : (tensor<ui32>) -> tensor<1x128x512xui32>
        %49 = stablehlo.and %47, %48 : tensor<1x128x512xui32>
        %50 = stablehlo.bitcast_convert %49 : (tensor<1x128x512xui32>) -> tensor<1x128x512xf32>
        %51 = func.call @_where_1(%46, %50, %42) : (tensor<1x128x512xi1>, tensor<1x128x512xf32>, tensor<1x128x512xf32>) -> tensor<1x128x512xf32>
        %52 = stablehlo.subtract %41, %51 : tensor<1x128x512xf32>
        %cst_17 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
        %53 = stablehlo.broadcast_in_dim %cst_17, dims = [] : (tensor<f32>) -> tensor<1x128x512xf32>
        %54 = stablehlo.multiply %52, %53 : tensor<1x128x512xf32>
        %55 = stablehlo.reduce_precision %54, format = e8m7 : tensor<1x128x512xf32>
        %56 = func.call @isinf(%55) : (tensor<1x128x512xf32>) -> tensor<1x128x512xi1>
        %57 = func.call @isinf(%54) : (tensor<1x128x512xf32>) -> tensor<1x128x512xi1>
        %58 = stablehlo.not %57 : tensor<1x128x512xi1>
        %59 = stablehlo.and %56, %58 : tensor<1x128x512xi1>
        %60 = stablehlo.bitcast_convert %54 : (tensor<1x128x512xf32>) -> tensor<1x128x512xui32>
        %c_18 = stablehlo.constant dense<4294901760> : tensor<ui32>
        %61 = stablehlo.broadcast_in_dim %c_18, dims = [] : (tensor<ui32>) -> tensor<1x128x512xui32>
        %62 = stablehlo.and %60, %61 : tensor<1x128x512xui32>
        %63 = stablehlo.bitcast_convert %62 : (tensor<1x128x512xui32>) -> tensor<1x128x512xf32>
        %64 = func.call @_where_1(%59, %63, %55) : (tensor<1x128x512xi1>, tensor<1x128x512xf32>, tensor<1x128x512xf32>) -> tensor<1x128x512xf32>
        %65 = stablehlo.subtract %54, %64 : tensor<1x128x512xf32>
        %cst_19 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
        %66 = stablehlo.broadcast_in_dim %cst_19, dims = [] : (tensor<f32>) -> tensor<1x128x512xf32>
        %67 = stablehlo.multiply %65, %66 : tensor<1x128x512xf32>
        %68 = stablehlo.reduce_precision %28, format = e8m7 : tensor<1x512x64xf32>
        %69 = func.call @isinf_2(%68) : (tensor<1x512x64xf32>) -> tensor<1x512x64xi1>
        %70 = func.call @isinf_2(%28) : (tensor<1x512x64xf32>) -> tensor<1x512x64xi1>
        %71 = stablehlo.not %70 : tensor<1x512x64xi1>
        %72 = stablehlo.and %69, %71 : tensor<1x512x64xi1>
        %73 = stablehlo.bitcast_convert %28 : (tensor<1x512x64xf32>) -> tensor<1x512x64xui32>
        %c_20 = stablehlo.constant dense<4294901760> : tensor<ui32>
        %74 = stablehlo.broadcast_in_dim %c_20, dims = [] : (tensor<ui32>) -> tensor<1x512x64xui32>
        %75 = stablehlo.and %73, %74 : tensor<1x512x64xui32>
        %76 = stablehlo.bitcast_convert %75 : (tensor<1x512x64xui32>) -> tensor<1x512x64xf32>
        %77 = func.call @_where_3(%72, %76, %68) : (tensor<1x512x64xi1>, tensor<1x512x64xf32>, tensor<1x512x64xf32>) -> tensor<1x512x64xf32>
        %78 = stablehlo.subtract %28, %77 : tensor<1x512x64xf32>
        %cst_21 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
        %79 = stablehlo.broadcast_in_dim %cst_21, dims = [] : (tensor<f32>) -> tensor<1x512x64xf32>
        %80 = stablehlo.multiply %78, %79 : tensor<1x512x64xf32>
        %81 = stablehlo.reduce_precision %80, format = e8m7 : tensor<1x512x64xf32>
        %82 = func.call @isinf_2(%81) : (tensor<1x512x64xf32>) -> tensor<1x512x64xi1>
        %83 = func.call @isinf_2(%80) : (tensor<1x512x64xf32>) -> tensor<1x512x64xi1>
        %84 = stablehlo.not %83 : tensor<1x512x64xi1>
        %85 = stablehlo.and %82, %84 : tensor<1x512x64xi1>
        %86 = stablehlo.bitcast_convert %80 : (tensor<1x512x64xf32>) -> tensor<1x512x64xui32>
        %c_22 = stablehlo.constant dense<4294901760> : tensor<ui32>
        %87 = stablehlo.broadcast_in_dim %c_22, dims = [] : (tensor<ui32>) -> tensor<1x512x64xui32>
        %88 = stablehlo.and %86, %87 : tensor<1x512x64xui32>
        %89 = stablehlo.bitcast_convert %88 : (tensor<1x512x64xui32>) -> tensor<1x512x64xf32>
        %90 = func.call @_where_3(%85, %89, %81) : (tensor<1x512x64xi1>, tensor<1x512x64xf32>, tensor<1x512x64xf32>) -> tensor<1x512x64xf32>
        %91 = stablehlo.subtract %80, %90 : tensor<1x512x64xf32>
        %cst_23 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
        %92 = stablehlo.broadcast_in_dim %cst_23, dims = [] : (tensor<f32>) -> tensor<1x512x64xf32>
        %93 = stablehlo.multiply %91, %92 : tensor<1x512x64xf32>
        %94 = stablehlo.reduce_precision %93, format = e8m7 : tensor<1x512x64xf32>
        %95 = func.call @isinf_2(%94) : (tensor<1x512x64xf32>) -> tensor<1x512x64xi1>
        %96 = func.call @isinf_2(%93) : (tensor<1x512x64xf32>) -> tensor<1x512x64xi1>
        %97 = stablehlo.not %96 : tensor<1x512x64xi1>
        %98 = stablehlo.and %95, %97 : tensor<1x512x64xi1>
        %99 = stablehlo.bitcast_convert %93 : (tensor<1x512x64xf32>) -> tensor<1x512x64xui32>
        %c_24 = stablehlo.constant dense<4294901760> : tensor<ui32>
        %100 = stablehlo.broadcast_in_dim %c_24, dims = [] : (tensor<ui32>) -> tensor<1x512x64xui32>
        %101 = stablehlo.and %99, %100 : tensor<1x512x64xui32>
        %102 = stablehlo.bitcast_convert %101 : (tensor<1x512x64xui32>) -> tensor<1x512x64xf32>
        %103 = func.call @_where_3(%98, %102, %94) : (tensor<1x512x64xi1>, tensor<1x512x64xf32>, tensor<1x512x64xf32>) -> tensor<1x512x64xf32>
        %104 = stablehlo.subtract %93, %103 : tensor<1x512x64xf32>
        %cst_25 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
        %105 = stablehlo.broadcast_in_dim %cst_25, dims = [] : (tensor<f32>) -> tensor<1x512x64xf32>
        %106 = stablehlo.multiply %104, %105 : tensor<1x512x64xf32>
        %107 = stablehlo.convert %38 : (tensor<1x128x512xf32>) -> tensor<1x128x512xbf16>
        %108 = stablehlo.convert %51 : (tensor<1x128x512xf32>) -> tensor<1x128x512xbf16>
        %109 = stablehlo.convert %64 : (tensor<1x128x512xf32>) -> tensor<1x128x512xbf16>
        %110 = stablehlo.convert %77 : (tensor<1x512x64xf32>) -> tensor<1x512x64xbf16>
        %111 = stablehlo.convert %90 : (tensor<1x512x64xf32>) -> tensor<1x512x64xbf16>
        %112 = stablehlo.convert %103 : (tensor<1x512x64xf32>) -> tensor<1x512x64xbf16>
        %113 = stablehlo.reshape %107 : (tensor<1x128x512xbf16>) -> tensor<1x128x8x64xbf16>
        %114 = stablehlo.reshape %108 : (tensor<1x128x512xbf16>) -> tensor<1x128x8x64xbf16>
        %115 = stablehlo.reshape %109 : (tensor<1x128x512xbf16>) -> tensor<1x128x8x64xbf16>
        %116 = stablehlo.reshape %110 : (tensor<1x512x64xbf16>) -> tensor<1x8x64x64xbf16>
        %117 = stablehlo.reshape %111 : (tensor<1x512x64xbf16>) -> tensor<1x8x64x64xbf16>
        %118 = stablehlo.reshape %112 : (tensor<1x512x64xbf16>) -> tensor<1x8x64x64xbf16>
        %119 = stablehlo.concatenate %113, %114, %115, dim = 3 : (tensor<1x128x8x64xbf16>, tensor<1x128x8x64xbf16>, tensor<1x128x8x64xbf16>) -> tensor<1x128x8x192xbf16>
        %120 = stablehlo.concatenate %118, %117, %116, dim = 2 : (tensor<1x8x64x64xbf16>, tensor<1x8x64x64xbf16>, tensor<1x8x64x64xbf16>) -> tensor<1x8x192x64xbf16>
        %121 = stablehlo.dot_general %119, %120, batching_dims = [0, 2] x [0, 1], contracting_dims = [3] x [2], precision = [DEFAULT, DEFAULT] : (tensor<1x128x8x192xbf16>, tensor<1x8x192x64xbf16>) -> tensor<1x8x128x64xf32>
        %122 = stablehlo.concatenate %113, %114, dim = 3 : (tensor<1x128x8x64xbf16>, tensor<1x128x8x64xbf16>) -> tensor<1x128x8x128xbf16>
        %123 = stablehlo.concatenate %117, %116, dim = 2 : (tensor<1x8x64x64xbf16>, tensor<1x8x64x64xbf16>) -> tensor<1x8x128x64xbf16>
        %124 = stablehlo.dot_general %122, %123, batching_dims = [0, 2] x [0, 1], contracting_dims = [3] x [2], precision = [DEFAULT, DEFAULT] : (tensor<1x128x8x128xbf16>, tensor<1x8x128x64xbf16>) -> tensor<1x8x128x64xf32>
        %125 = stablehlo.dot_general %113, %116, batching_dims = [0, 2] x [0, 1], contracting_dims = [3] x [2], precision = [DEFAULT, DEFAULT] : (tensor<1x128x8x64xbf16>, tensor<1x8x64x64xbf16>) -> tensor<1x8x128x64xf32>
        %cst_26 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
        %126 = stablehlo.reduce(%121 init: %cst_26) applies stablehlo.add across dimensions = [1] : (tensor<1x8x128x64xf32>, tensor<f32>) -> tensor<1x128x64xf32>
        %cst_27 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
        %127 = stablehlo.reduce(%124 init: %cst_27) applies stablehlo.add across dimensions = [1] : (tensor<1x8x128x64xf32>, tensor<f32>) -> tensor<1x128x64xf32>
        %cst_28 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
        %128 = stablehlo.reduce(%125 init: %cst_28) applies stablehlo.add across dimensions = [1] : (tensor<1x8x128x64xf32>, tensor<f32>) -> tensor<1x128x64xf32>
        %129 = stablehlo.is_finite %126 : (tensor<1x128x64xf32>) -> tensor<1x128x64xi1>
        %cst_29 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
        %130 = func.call @_where_4(%129, %126, %cst_29) : (tensor<1x128x64xi1>, tensor<1x128x64xf32>, tensor<f32>) -> tensor<1x128x64xf32>
        %131 = stablehlo.is_finite %127 : (tensor<1x128x64xf32>) -> tensor<1x128x64xi1>
        %cst_30 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
        %132 = func.call @_where_4(%131, %127, %cst_30) : (tensor<1x128x64xi1>, tensor<1x128x64xf32>, tensor<f32>) -> tensor<1x128x64xf32>
        %133 = stablehlo.add %130, %132 : tensor<1x128x64xf32>
        %134 = stablehlo.add %133, %128 : tensor<1x128x64xf32>
        %135 = stablehlo.is_finite %134 : (tensor<1x128x64xf32>) -> tensor<1x128x64xi1>
        %136 = stablehlo.dot_general %27, %28, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [HIGHEST, HIGHEST] : (tensor<1x128x512xf32>, tensor<1x512x64xf32>) -> tensor<1x128x64xf32>
        %137 = func.call @_where_5(%135, %134, %136) : (tensor<1x128x64xi1>, tensor<1x128x64xf32>, tensor<1x128x64xf32>) -> tensor<1x128x64xf32>
        %138 = stablehlo.bitcast_convert %9 : (tensor<1x128x512xf32>) -> tensor<1x128x512xi32>
        %c_31 = stablehlo.constant dense<2147483647> : tensor<i32>
        %139 = stablehlo.broadcast_in_dim %c_31, dims = [] : (tensor<i32>) -> tensor<1x128x512xi32>
        %140 = stablehlo.and %138, %139 : tensor<1x128x512xi32>
        %c_32 = stablehlo.constant dense<1> : tensor<i32>
        %141 = stablehlo.broadcast_in_dim %c_32, dims = [] : (tensor<i32>) -> tensor<1x128x512xi32>
        %142 = stablehlo.minimum %140, %141 : tensor<1x128x512xi32>
        %c_33 = stablehlo.constant dense<31> : tensor<i32>
        %143 = stablehlo.broadcast_in_dim %c_33, dims = [] : (tensor<i32>) -> tensor<1x128x512xi32>
        %144 = stablehlo.shift_right_arithmetic %138, %143 : tensor<1x128x512xi32>
        %c_34 = stablehlo.constant dense<1> : tensor<i32>
        %145 = stablehlo.broadcast_in_dim %c_34, dims = [] : (tensor<i32>) -> tensor<1x128x512xi32>
        %146 = stablehlo.and %144, %145 : tensor<1x128x512xi32>
        %c_35 = stablehlo.constant dense<2> : tensor<i32>
        %147 = stablehlo.broadcast_in_dim %c_35, dims = [] : (tensor<i32>) -> tensor<1x128x512xi32>
        %148 = stablehlo.multiply %147, %146 : tensor<1x128x512xi32>
        %c_36 = stablehlo.constant dense<1> : tensor<i32>
        %149 = stablehlo.broadcast_in_dim %c_36, dims = [] : (tensor<i32>) -> tensor<1x128x512xi32>
        %150 = stablehlo.subtract %149, %148 : tensor<1x128x512xi32>
        %151 = stablehlo.is_finite %9 : (tensor<1x128x512xf32>) -> tensor<1x128x512xi1>
        %152 = stablehlo.multiply %150, %142 : tensor<1x128x512xi32>
        %153 = stablehlo.convert %152 : (tensor<1x128x512xi32>) -> tensor<1x128x512xbf16>
        %154 = stablehlo.convert %9 : (tensor<1x128x512xf32>) -> tensor<1x128x512xbf16>
        %155 = func.call @_where_6(%151, %153, %154) : (tensor<1x128x512xi1>, tensor<1x128x512xbf16>, tensor<1x128x512xbf16>) -> tensor<1x128x512xbf16>
        %156 = stablehlo.bitcast_convert %10 : (tensor<1x512x64xf32>) -> tensor<1x512x64xi32>
        %c_37 = stablehlo.constant dense<2147483647> : tensor<i32>
        %157 = stablehlo.broadcast_in_dim %c_37, dims = [] : (tensor<i32>) -> tensor<1x512x64xi32>
        %158 = stablehlo.and %156, %157 : tensor<1x512x64xi32>
        %c_38 = stablehlo.constant dense<1> : tensor<i32>
        %159 = stablehlo.broadcast_in_dim %c_38, dims = [] : (tensor<i32>) -> tensor<1x512x64xi32>
        %160 = stablehlo.minimum %158, %159 : tensor<1x512x64xi32>
        %c_39 = stablehlo.constant dense<31> : tensor<i32>
        %161 = stablehlo.broadcast_in_dim %c_39, dims = [] : (tensor<i32>) -> tensor<1x512x64xi32>
        %162 = stablehlo.shift_right_arithmetic %156, %161 : tensor<1x512x64xi32>
        %c_40 = stablehlo.constant dense<1> : tensor<i32>
        %163 = stablehlo.broadcast_in_dim %c_40, dims = [] : (tensor<i32>) -> tensor<1x512x64xi32>
        %164 = stablehlo.and %162, %163 : tensor<1x512x64xi32>
        %c_41 = stablehlo.constant dense<2> : tensor<i32>
        %165 = stablehlo.broadcast_in_dim %c_41, dims = [] : (tensor<i32>) -> tensor<1x512x64xi32>
        %166 = stablehlo.multiply %165, %164 : tensor<1x512x64xi32>
        %c_42 = stablehlo.constant dense<1> : tensor<i32>
        %167 = stablehlo.broadcast_in_dim %c_42, dims = [] : (tensor<i32>) -> tensor<1x512x64xi32>
        %168 = stablehlo.subtract %167, %166 : tensor<1x512x64xi32>
        %169 = stablehlo.is_finite %10 : (tensor<1x512x64xf32>) -> tensor<1x512x64xi1>
        %170 = stablehlo.multiply %168, %160 : tensor<1x512x64xi32>
        %171 = stablehlo.convert %170 : (tensor<1x512x64xi32>) -> tensor<1x512x64xbf16>
        %172 = stablehlo.convert %10 : (tensor<1x512x64xf32>) -> tensor<1x512x64xbf16>
        %173 = func.call @_where_7(%169, %171, %172) : (tensor<1x512x64xi1>, tensor<1x512x64xbf16>, tensor<1x512x64xbf16>) -> tensor<1x512x64xbf16>
        %174 = stablehlo.dot_general %155, %173, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<1x128x512xbf16>, tensor<1x512x64xbf16>) -> tensor<1x128x64xf32>
        %175 = stablehlo.is_finite %174 : (tensor<1x128x64xf32>) -> tensor<1x128x64xi1>
        %176 = func.call @_where_5(%175, %137, %174) : (tensor<1x128x64xi1>, tensor<1x128x64xf32>, tensor<1x128x64xf32>) -> tensor<1x128x64xf32>
        %177 = stablehlo.reshape %176 : (tensor<1x128x64xf32>) -> tensor<8192xf32>
        stablehlo.return %177 : tensor<8192xf32>
      }, {
        %25 = stablehlo.reduce_precision %9, format = e8m7 : tensor<1x128x512xf32>
        %26 = func.call @isinf(%25) : (tensor<1x128x512xf32>) -> tensor<1x128x512xi1>
        %27 = func.call @isinf(%9) : (tensor<1x128x512xf32>) -> tensor<1x128x512xi1>
        %28 = stablehlo.not %27 : tensor<1x128x512xi1>
        %29 = stablehlo.and %26, %28 : tensor<1x128x512xi1>
        %30 = stablehlo.bitcast_convert %9 : (tensor<1x128x512xf32>) -> tensor<1x128x512xui32>
        %c_12 = stablehlo.constant dense<4294901760> : tensor<ui32>
        %31 = stablehlo.broadcast_in_dim %c_12, dims = [] : (tensor<ui32>) -> tensor<1x128x512xui32>
        %32 = stablehlo.and %30, %31 : tensor<1x128x512xui32>
        %33 = stablehlo.bitcast_convert %32 : (tensor<1x128x512xui32>) -> tensor<1x128x512xf32>
        %34 = func.call @_where_1(%29, %33, %25) : (tensor<1x128x512xi1>, tensor<1x128x512xf32>, tensor<1x128x512xf32>) -> tensor<1x128x512xf32>
        %35 = stablehlo.subtract %9, %34 : tensor<1x128x512xf32>
        %cst_13 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
        %36 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<f32>) -> tensor<1x128x512xf32>
        %37 = stablehlo.multiply %35, %36 : tensor<1x128x512xf32>
        %38 = stablehlo.reduce_precision %37, format = e8m7 : tensor<1x128x512xf32>
        %39 = func.call @isinf(%38) : (tensor<1x128x512xf32>) -> tensor<1x128x512xi1>
        %40 = func.call @isinf(%37) : (tensor<1x128x512xf32>) -> tensor<1x128x512xi1>
        %41 = stablehlo.not %40 : tensor<1x128x512xi1>
        %42 = stablehlo.and %39, %41 : tensor<1x128x512xi1>
        %43 = stablehlo.bitcast_convert %37 : (tensor<1x128x512xf32>) -> tensor<1x128x512xui32>
        %c_14 = stablehlo.constant dense<4294901760> : tensor<ui32>
        %44 = stablehlo.broadcast_in_dim %c_14, dims = [] : (tensor<ui32>) -> tensor<1x128x512xui32>
        %45 = stablehlo.and %43, %44 : tensor<1x128x512xui32>
        %46 = stablehlo.bitcast_convert %45 : (tensor<1x128x512xui32>) -> tensor<1x128x512xf32>
        %47 = func.call @_where_1(%42, %46, %38) : (tensor<1x128x512xi1>, tensor<1x128x512xf32>, tensor<1x128x512xf32>) -> tensor<1x128x512xf32>
        %48 = stablehlo.subtract %37, %47 : tensor<1x128x512xf32>
        %cst_15 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
        %49 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<f32>) -> tensor<1x128x512xf32>
        %50 = stablehlo.multiply %48, %49 : tensor<1x128x512xf32>
        %51 = stablehlo.reduce_precision %50, format = e8m7 : tensor<1x128x512xf32>
        %52 = func.call @isinf(%51) : (tensor<1x128x512xf32>) -> tensor<1x128x512xi1>
        %53 = func.call @isinf(%50) : (tensor<1x128x512xf32>) -> tensor<1x128x512xi1>
        %54 = stablehlo.not %53 : tensor<1x128x512xi1>
        %55 = stablehlo.and %52, %54 : tensor<1x128x512xi1>
        %56 = stablehlo.bitcast_convert %50 : (tensor<1x128x512xf32>) -> tensor<1x128x512xui32>
        %c_16 = stablehlo.constant dense<4294901760> : tensor<ui32>
        %57 = stablehlo.broadcast_in_dim %c_16, dims = [] : (tensor<ui32>) -> tensor<1x128x512xui32>
        %58 = stablehlo.and %56, %57 : tensor<1x128x512xui32>
        %59 = stablehlo.bitcast_convert %58 : (tensor<1x128x512xui32>) -> tensor<1x128x512xf32>
        %60 = func.call @_where_1(%55, %59, %51) : (tensor<1x128x512xi1>, tensor<1x128x512xf32>, tensor<1x128x512xf32>) -> tensor<1x128x512xf32>
        %61 = stablehlo.subtract %50, %60 : tensor<1x128x512xf32>
        %cst_17 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
        %62 = stablehlo.broadcast_in_dim %cst_17, dims = [] : (tensor<f32>) -> tensor<1x128x512xf32>
        %63 = stablehlo.multiply %61, %62 : tensor<1x128x512xf32>
        %64 = stablehlo.reduce_precision %10, format = e8m7 : tensor<1x512x64xf32>
        %65 = func.call @isinf_2(%64) : (tensor<1x512x64xf32>) -> tensor<1x512x64xi1>
        %66 = func.call @isinf_2(%10) : (tensor<1x512x64xf32>) -> tensor<1x512x64xi1>
        %67 = stablehlo.not %66 : tensor<1x512x64xi1>
        %68 = stablehlo.and %65, %67 : tensor<1x512x64xi1>
        %69 = stablehlo.bitcast_convert %10 : (tensor<1x512x64xf32>) -> tensor<1x512x64xui32>
        %c_18 = stablehlo.constant dense<4294901760> : tensor<ui32>
        %70 = stablehlo.broadcast_in_dim %c_18, dims = [] : (tensor<ui32>) -> tensor<1x512x64xui32>
        %71 = stablehlo.and %69, %70 : tensor<1x512x64xui32>
        %72 = stablehlo.bitcast_convert %71 : (tensor<1x512x64xui32>) -> tensor<1x512x64xf32>
        %73 = func.call @_where_3(%68, %72, %64) : (tensor<1x512x64xi1>, tensor<1x512x64xf32>, tensor<1x512x64xf32>) -> tensor<1x512x64xf32>
        %74 = stablehlo.subtract %10, %73 : tensor<1x512x64xf32>
        %cst_19 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
        %75 = stablehlo.broadcast_in_dim %cst_19, dims = [] : (tensor<f32>) -> tensor<1x512x64xf32>
        %76 = stablehlo.multiply %74, %75 : tensor<1x512x64xf32>
        %77 = stablehlo.reduce_precision %76, format = e8m7 : tensor<1x512x64xf32>
        %78 = func.call @isinf_2(%77) : (tensor<1x512x64xf32>) -> tensor<1x512x64xi1>
        %79 = func.call @isinf_2(%76) : (tensor<1x512x64xf32>) -> tensor<1x512x64xi1>
        %80 = stablehlo.not %79 : tensor<1x512x64xi1>
        %81 = stablehlo.and %78, %80 : tensor<1x512x64xi1>
        %82 = stablehlo.bitcast_convert %76 : (tensor<1x512x64xf32>) -> tensor<1x512x64xui32>
        %c_20 = stablehlo.constant dense<4294901760> : tensor<ui32>
        %83 = stablehlo.broadcast_in_dim %c_20, dims = [] : (tensor<ui32>) -> tensor<1x512x64xui32>
        %84 = stablehlo.and %82, %83 : tensor<1x512x64xui32>
        %85 = stablehlo.bitcast_convert %84 : (tensor<1x512x64xui32>) -> tensor<1x512x64xf32>
        %86 = func.call @_where_3(%81, %85, %77) : (tensor<1x512x64xi1>, tensor<1x512x64xf32>, tensor<1x512x64xf32>) -> tensor<1x512x64xf32>
        %87 = stablehlo.subtract %76, %86 : tensor<1x512x64xf32>
        %cst_21 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
        %88 = stablehlo.broadcast_in_dim %cst_21, dims = [] : (tensor<f32>) -> tensor<1x512x64xf32>
        %89 = stablehlo.multiply %87, %88 : tensor<1x512x64xf32>
        %90 = stablehlo.reduce_precision %89, format = e8m7 : tensor<1x512x64xf32>
        %91 = func.call @isinf_2(%90) : (tensor<1x512x64xf32>) -> tensor<1x512x64xi1>
        %92 = func.call @isinf_2(%89) : (tensor<1x512x64xf32>) -> tensor<1x512x64xi1>
        %93 = stablehlo.not %92 : tensor<1x512x64xi1>
        %94 = stablehlo.and %91, %93 : tensor<1x512x64xi1>
        %95 = stablehlo.bitcast_convert %89 : (tensor<1x512x64xf32>) -> tensor<1x512x64xui32>
        %c_22 = stablehlo.constant dense<4294901760> : tensor<ui32>
        %96 = stablehlo.broadcast_in_dim %c_22, dims = [] : (tensor<ui32>) -> tensor<1x512x64xui32>
        %97 = stablehlo.and %95, %96 : tensor<1x512x64xui32>
        %98 = stablehlo.bitcast_convert %97 : (tensor<1x512x64xui32>) -> tensor<1x512x64xf32>
        %99 = func.call @_where_3(%94, %98, %90) : (tensor<1x512x64xi1>, tensor<1x512x64xf32>, tensor<1x512x64xf32>) -> tensor<1x512x64xf32>
        %100 = stablehlo.subtract %89, %99 : tensor<1x512x64xf32>
        %cst_23 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
        %101 = stablehlo.broadcast_in_dim %cst_23, dims = [] : (tensor<f32>) -> tensor<1x512x64xf32>
        %102 = stablehlo.multiply %100, %101 : tensor<1x512x64xf32>
        %103 = stablehlo.convert %34 : (tensor<1x128x512xf32>) -> tensor<1x128x512xbf16>
        %104 = stablehlo.convert %47 : (tensor<1x128x512xf32>) -> tensor<1x128x512xbf16>
        %105 = stablehlo.convert %60 : (tensor<1x128x512xf32>) -> tensor<1x128x512xbf16>
        %106 = stablehlo.convert %73 : (tensor<1x512x64xf32>) -> tensor<1x512x64xbf16>
        %107 = stablehlo.convert %86 : (tensor<1x512x64xf32>) -> tensor<1x512x64xbf16>
        %108 = stablehlo.convert %99 : (tensor<1x512x64xf32>) -> tensor<1x512x64xbf16>
        %109 = stablehlo.reshape %103 : (tensor<1x128x512xbf16>) -> tensor<1x128x8x64xbf16>
        %110 = stablehlo.reshape %104 : (tensor<1x128x512xbf16>) -> tensor<1x128x8x64xbf16>
        %111 = stablehlo.reshape %105 : (tensor<1x128x512xbf16>) -> tensor<1x128x8x64xbf16>
        %112 = stablehlo.reshape %106 : (tensor<1x512x64xbf16>) -> tensor<1x8x64x64xbf16>
        %113 = stablehlo.reshape %107 : (tensor<1x512x64xbf16>) -> tensor<1x8x64x64xbf16>
        %114 = stablehlo.reshape %108 : (tensor<1x512x64xbf16>) -> tensor<1x8x64x64xbf16>
        %115 = stablehlo.concatenate %109, %110, %111, dim = 3 : (tensor<1x128x8x64xbf16>, tensor<1x128x8x64xbf16>, tensor<1x128x8x64xbf16>) -> tensor<1x128x8x192xbf16>
        %116 = stablehlo.concatenate %114, %113, %112, dim = 2 : (tensor<1x8x64x64xbf16>, tensor<1x8x64x64xbf16>, tensor<1x8x64x64xbf16>) -> tensor<1x8x192x64xbf16>
        %117 = stablehlo.dot_general %115, %116, batching_dims = [0, 2] x [0, 1], contracting_dims = [3] x [2], precision = [DEFAULT, DEFAULT] : (tensor<1x128x8x192xbf16>, tensor<1x8x192x64xbf16>) -> tensor<1x8x128x64xf32>
        %118 = stablehlo.concatenate %109, %110, dim = 3 : (tensor<1x128x8x64xbf16>, tensor<1x128x8x64xbf16>) -> tensor<1x128x8x128xbf16>
        %119 = stablehlo.concatenate %113, %112, dim = 2 : (tensor<1x8x64x64xbf16>, tensor<1x8x64x64xbf16>) -> tensor<1x8x128x64xbf16>
        %120 = stablehlo.dot_general %118, %119, batching_dims = [0, 2] x [0, 1], contracting_dims = [3] x [2], precision = [DEFAULT, DEFAULT] : (tensor<1x128x8x128xbf16>, tensor<1x8x128x64xbf16>) -> tensor<1x8x128x64xf32>
        %121 = stablehlo.dot_general %109, %112, batching_dims = [0, 2] x [0, 1], contracting_dims = [3] x [2], precision = [DEFAULT, DEFAULT] : (tensor<1x128x8x64xbf16>, tensor<1x8x64x64xbf16>) -> tensor<1x8x128x64xf32>
        %cst_24 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
        %122 = stablehlo.reduce(%117 init: %cst_24) applies stablehlo.add across dimensions = [1] : (tensor<1x8x128x64xf32>, tensor<f32>) -> tensor<1x128x64xf32>
        %cst_25 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
        %123 = stablehlo.reduce(%120 init: %cst_25) applies stablehlo.add across dimensions = [1] : (tensor<1x8x128x64xf32>, tensor<f32>) -> tensor<1x128x64xf32>
        %cst_26 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
        %124 = stablehlo.reduce(%121 init: %cst_26) applies stablehlo.add across dimensions = [1] : (tensor<1x8x128x64xf32>, tensor<f32>) -> tensor<1x128x64xf32>
        %125 = stablehlo.is_finite %122 : (tensor<1x128x64xf32>) -> tensor<1x128x64xi1>
        %cst_27 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
        %126 = func.call @_where_4(%125, %122, %cst_27) : (tensor<1x128x64xi1>, tensor<1x128x64xf32>, tensor<f32>) -> tensor<1x128x64xf32>
        %127 = stablehlo.is_finite %123 : (tensor<1x128x64xf32>) -> tensor<1x128x64xi1>
        %cst_28 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
        %128 = func.call @_where_4(%127, %123, %cst_28) : (tensor<1x128x64xi1>, tensor<1x128x64xf32>, tensor<f32>) -> tensor<1x128x64xf32>
        %129 = stablehlo.add %126, %128 : tensor<1x128x64xf32>
        %130 = stablehlo.add %129, %124 : tensor<1x128x64xf32>
        %131 = stablehlo.reshape %130 : (tensor<1x128x64xf32>) -> tensor<8192xf32>
        stablehlo.return %131 : tensor<8192xf32>
      }) : (tensor<i32>) -> tensor<8192xf32>
      %21 = stablehlo.reshape %20 : (tensor<8192xf32>) -> tensor<1x128x64xf32>
      %22 = stablehlo.reshape %21 : (tensor<1x128x64xf32>) -> tensor<128x64xf32>
      %23 = func.call @dynamic_update_index_in_dim(%iterArg_4, %22, %iterArg_3) : (tensor<4x128x64xf32>, tensor<128x64xf32>, tensor<i32>) -> tensor<4x128x64xf32>
      %c_11 = stablehlo.constant dense<1> : tensor<i32>
      %24 = stablehlo.add %iterArg_3, %c_11 : tensor<i32>
      stablehlo.return %iterArg, %iterArg_2, %24, %23 : tensor<4x128x512xf32>, tensor<512x64xf32>, tensor<i32>, tensor<4x128x64xf32>
    }
    %6 = stablehlo.reshape %5#3 : (tensor<4x128x64xf32>) -> tensor<512x64xf32>
    %7 = stablehlo.subtract %1, %6 : tensor<512x64xf32>
    return %7 : tensor<512x64xf32>
  }
  func.func private @dynamic_index_in_dim(%arg0: tensor<4x128x512xf32>, %arg1: tensor<i32>) -> tensor<128x512xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, sizes = [1, 128, 512] : (tensor<4x128x512xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x128x512xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x128x512xf32>) -> tensor<128x512xf32>
    return %1 : tensor<128x512xf32>
  }
  func.func private @_where(%arg0: tensor<1x128x512xi1>, %arg1: tensor<1x128x512xf32>, %arg2: tensor<f32>) -> tensor<1x128x512xf32> {
    %0 = stablehlo.convert %arg2 : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<1x128x512xf32>
    %2 = stablehlo.select %arg0, %arg1, %1 : tensor<1x128x512xi1>, tensor<1x128x512xf32>
    return %2 : tensor<1x128x512xf32>
  }
  func.func private @_where_0(%arg0: tensor<1x512x64xi1>, %arg1: tensor<1x512x64xf32>, %arg2: tensor<f32>) -> tensor<1x512x64xf32> {
    %0 = stablehlo.convert %arg2 : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<1x512x64xf32>
    %2 = stablehlo.select %arg0, %arg1, %1 : tensor<1x512x64xi1>, tensor<1x512x64xf32>
    return %2 : tensor<1x512x64xf32>
  }
  func.func private @isinf(%arg0: tensor<1x128x512xf32>) -> tensor<1x128x512xi1> {
    %0 = stablehlo.abs %arg0 : tensor<1x128x512xf32>
    %cst = stablehlo.constant dense<0x7F800000> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<1x128x512xf32>
    %2 = stablehlo.compare EQ, %0, %1, FLOAT : (tensor<1x128x512xf32>, tensor<1x128x512xf32>) -> tensor<1x128x512xi1>
    return %2 : tensor<1x128x512xi1>
  }
  func.func private @_where_1(%arg0: tensor<1x128x512xi1>, %arg1: tensor<1x128x512xf32>, %arg2: tensor<1x128x512xf32>) -> tensor<1x128x512xf32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<1x128x512xi1>, tensor<1x128x512xf32>
    return %0 : tensor<1x128x512xf32>
  }
  func.func private @isinf_2(%arg0: tensor<1x512x64xf32>) -> tensor<1x512x64xi1> {
    %0 = stablehlo.abs %arg0 : tensor<1x512x64xf32>
    %cst = stablehlo.constant dense<0x7F800000> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<1x512x64xf32>
    %2 = stablehlo.compare EQ, %0, %1, FLOAT : (tensor<1x512x64xf32>, tensor<1x512x64xf32>) -> tensor<1x512x64xi1>
    return %2 : tensor<1x512x64xi1>
  }
  func.func private @_where_3(%arg0: tensor<1x512x64xi1>, %arg1: tensor<1x512x64xf32>, %arg2: tensor<1x512x64xf32>) -> tensor<1x512x64xf32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<1x512x64xi1>, tensor<1x512x64xf32>
    return %0 : tensor<1x512x64xf32>
  }
  func.func private @_where_4(%arg0: tensor<1x128x64xi1>, %arg1: tensor<1x128x64xf32>, %arg2: tensor<f32>) -> tensor<1x128x64xf32> {
    %0 = stablehlo.convert %arg2 : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<1x128x64xf32>
    %2 = stablehlo.select %arg0, %arg1, %1 : tensor<1x128x64xi1>, tensor<1x128x64xf32>
    return %2 : tensor<1x128x64xf32>
  }
  func.func private @_where_5(%arg0: tensor<1x128x64xi1>, %arg1: tensor<1x128x64xf32>, %arg2: tensor<1x128x64xf32>) -> tensor<1x128x64xf32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<1x128x64xi1>, tensor<1x128x64xf32>
    return %0 : tensor<1x128x64xf32>
  }
  func.func private @_where_6(%arg0: tensor<1x128x512xi1>, %arg1: tensor<1x128x512xbf16>, %arg2: tensor<1x128x512xbf16>) -> tensor<1x128x512xbf16> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<1x128x512xi1>, tensor<1x128x512xbf16>
    return %0 : tensor<1x128x512xbf16>
  }
  func.func private @_where_7(%arg0: tensor<1x512x64xi1>, %arg1: tensor<1x512x64xbf16>, %arg2: tensor<1x512x64xbf16>) -> tensor<1x512x64xbf16> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<1x512x64xi1>, tensor<1x512x64xbf16>
    return %0 : tensor<1x512x64xbf16>
  }
  func.func private @dynamic_update_index_in_dim(%arg0: tensor<4x128x64xf32>, %arg1: tensor<128x64xf32>, %arg2: tensor<i32>) -> tensor<4x128x64xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2] : (tensor<128x64xf32>) -> tensor<1x128x64xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c, %c_0 : (tensor<4x128x64xf32>, tensor<1x128x64xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<4x128x64xf32>
    return %1 : tensor<4x128x64xf32>
  }
}
