// SPDX-License-Identifier: MIT
pragma solidity ^0.8.37;

interface IERC20Like {
    function balanceOf(address account) external view returns (uint256);
    function decimals() external view returns (uint8);
}

interface IC0Like {
    function mint(address to, uint256 amount) external;
    function burn(uint256 amount) external;
}

/// @title SwapFacility
/// @notice Swaps USDC/USDT <-> c0 one-to-one in value, whatever decimals each token
///         has (c0 at least as many as a stablecoin): the scales are read from the
///         tokens when the facility is deployed. Stablecoins paid in stay here as
///         reserves for swaps back out. The facility must be a minter of c0.
contract SwapFacility {
    address public immutable c0;
    address public immutable usdc;
    address public immutable usdt;
    /// @notice 10^(c0 decimals - USDC decimals): c0 base units per USDC base unit.
    uint256 public immutable usdcScale;
    /// @notice 10^(c0 decimals - USDT decimals): c0 base units per USDT base unit.
    uint256 public immutable usdtScale;

    event Swap(
        address indexed sender,
        address indexed recipient,
        address indexed tokenIn,
        address tokenOut,
        uint256 amountIn,
        uint256 amountOut
    );

    constructor(address c0_, address usdc_, address usdt_) {
        require(c0_ != address(0) && usdc_ != address(0) && usdt_ != address(0), "SwapFacility: zero address");
        c0 = c0_;
        usdc = usdc_;
        usdt = usdt_;
        uint8 places = IERC20Like(c0_).decimals();
        usdcScale = _scale(places, IERC20Like(usdc_).decimals());
        usdtScale = _scale(places, IERC20Like(usdt_).decimals());
    }

    /// @notice c0 base units per base unit of `stablecoin` (USDC or USDT).
    function scale(address stablecoin) public view returns (uint256) {
        if (stablecoin == usdc) return usdcScale;
        require(stablecoin == usdt, "SwapFacility: not a stablecoin");
        return usdtScale;
    }

    /// @notice Swap `amount` of `tokenIn` (pulled from the caller with transferFrom)
    ///         for `tokenOut`, sent to `recipient`. Returns the amount of `tokenOut`.
    function swap(address tokenIn, address tokenOut, uint256 amount, address recipient)
        external
        returns (uint256 amountOut)
    {
        require(amount != 0, "SwapFacility: zero amount");
        require(recipient != address(0), "SwapFacility: zero recipient");

        if (tokenOut == c0 && _isStablecoin(tokenIn)) {
            // deposit: stablecoin in, c0 minted
            amountOut = amount * scale(tokenIn);
            _safeTransferFrom(tokenIn, msg.sender, address(this), amount);
            IC0Like(c0).mint(recipient, amountOut);
        } else if (tokenIn == c0 && _isStablecoin(tokenOut)) {
            // withdrawal: c0 in and burned, stablecoin paid from reserves
            uint256 factor = scale(tokenOut);
            require(amount % factor == 0, "SwapFacility: dust");
            amountOut = amount / factor;
            require(
                IERC20Like(tokenOut).balanceOf(address(this)) >= amountOut,
                "SwapFacility: insufficient reserves"
            );
            _safeTransferFrom(c0, msg.sender, address(this), amount);
            IC0Like(c0).burn(amount);
            _safeTransfer(tokenOut, recipient, amountOut);
        } else {
            revert("SwapFacility: unsupported pair");
        }

        emit Swap(msg.sender, recipient, tokenIn, tokenOut, amount, amountOut);
    }

    function _scale(uint8 c0Places, uint8 stablecoinPlaces) private pure returns (uint256) {
        require(c0Places >= stablecoinPlaces, "SwapFacility: c0 has fewer decimals than a stablecoin");
        return uint256(10) ** (c0Places - stablecoinPlaces);
    }

    function _isStablecoin(address token) private view returns (bool) {
        return token == usdc || token == usdt;
    }

    // Tolerates tokens that return nothing (like mainnet USDT) as well as bool.
    function _safeTransfer(address token, address to, uint256 value) private {
        _callToken(token, abi.encodeWithSignature("transfer(address,uint256)", to, value));
    }

    function _safeTransferFrom(address token, address from, address to, uint256 value) private {
        _callToken(token, abi.encodeWithSignature("transferFrom(address,address,uint256)", from, to, value));
    }

    function _callToken(address token, bytes memory data) private {
        (bool ok, bytes memory ret) = token.call(data);
        if (!ok) {
            // bubble up the token's revert reason
            assembly {
                revert(add(ret, 32), mload(ret))
            }
        }
        require(ret.length == 0 || abi.decode(ret, (bool)), "SwapFacility: token transfer failed");
    }
}
