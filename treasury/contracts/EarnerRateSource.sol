// SPDX-License-Identifier: MIT
pragma solidity ^0.8.37;

/// @title EarnerRateSource
/// @notice Stand-in for M0's rate source: `earnerRate()` in basis points
///         (e.g. 415 = 4.15% a year), settable by the owner.
contract EarnerRateSource {
    address public owner;
    uint32 public earnerRate;

    event EarnerRateSet(uint32 previousRate, uint32 newRate);
    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);

    modifier onlyOwner() {
        require(msg.sender == owner, "EarnerRateSource: caller is not the owner");
        _;
    }

    constructor(uint32 initialRate) {
        owner = msg.sender;
        earnerRate = initialRate;
        emit OwnershipTransferred(address(0), msg.sender);
        emit EarnerRateSet(0, initialRate);
    }

    function setEarnerRate(uint32 newRate) external onlyOwner {
        emit EarnerRateSet(earnerRate, newRate);
        earnerRate = newRate;
    }

    function transferOwnership(address newOwner) external onlyOwner {
        require(newOwner != address(0), "EarnerRateSource: new owner is the zero address");
        emit OwnershipTransferred(owner, newOwner);
        owner = newOwner;
    }
}
