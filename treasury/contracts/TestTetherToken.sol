// SPDX-License-Identifier: MIT
pragma solidity ^0.8.37;

import {MintableERC20} from "./MintableERC20.sol";

/// @title TestTetherToken
/// @notice USDT-like test token: 6 decimals, and `approve` enforces mainnet
///         USDT's rule that a non-zero allowance can only be changed by first
///         setting it to zero. (Unlike mainnet USDT, transfer/approve do return bool.)
contract TestTetherToken is MintableERC20 {
    constructor(string memory name_, string memory symbol_) MintableERC20(name_, symbol_, 6) {}

    function approve(address spender, uint256 value) public override returns (bool) {
        require(
            !((value != 0) && (allowance[msg.sender][spender] != 0)),
            "USDT: approve from non-zero to non-zero allowance"
        );
        return super.approve(spender, value);
    }
}
